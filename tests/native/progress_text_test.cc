// The progress line and its meter (app/progress_text.h) and the one size format (text/size_text.h): sizes at every
// unit and rounding edge, rate and ETA, when a redraw is due, zero and huge totals, and when progress shows at all.
// Time is the test's: seconds are passed in.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "app/progress_text.h"
#include "text/size_text.h"

namespace pb::app {
namespace {

using text::RateText;
using text::SizeText;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

TEST(SizeText, BytesBelowAThousandAreWhole) {
  EXPECT_EQ(SizeText(0), "0 B");
  EXPECT_EQ(SizeText(1), "1 B");
  EXPECT_EQ(SizeText(999), "999 B");
}

TEST(SizeText, ThreeSignificantDigitsInDecimalUnits) {
  EXPECT_EQ(SizeText(1000), "1.00 kB");
  EXPECT_EQ(SizeText(1234), "1.23 kB");
  EXPECT_EQ(SizeText(12345), "12.3 kB");
  EXPECT_EQ(SizeText(123456), "123 kB");
  EXPECT_EQ(SizeText(1'160'000'000), "1.16 GB");
  EXPECT_EQ(SizeText(4'965'000'000), "4.96 GB");  // 4.965 is 4.96499... in binary: rounds down
  EXPECT_EQ(SizeText(2'000'000'000'000), "2.00 TB");
  EXPECT_EQ(SizeText(3'500'000'000'000'000), "3.50 PB");
}

TEST(SizeText, RoundingUpToAThousandMovesToTheNextUnit) {
  EXPECT_EQ(SizeText(999'499), "999 kB");
  EXPECT_EQ(SizeText(999'500), "1.00 MB");  // not "1000 kB"
  EXPECT_EQ(SizeText(9'995), "9.99 kB");    // 9.995 is 9.99499... in binary
  EXPECT_EQ(SizeText(9'996), "10.0 kB");    // not "10.00 kB"
  EXPECT_EQ(SizeText(99'960), "100 kB");    // not "100.0 kB"
  EXPECT_EQ(SizeText(99'950), "100 kB");    // not "100.0 kB"
  EXPECT_EQ(SizeText(999'999'999'999), "1.00 TB");
}

TEST(SizeText, TheLargestCountIsInExabytes) {
  EXPECT_EQ(SizeText(kMax), "18.4 EB");
  EXPECT_EQ(SizeText(1'000'000'000'000'000'000), "1.00 EB");
}

TEST(SizeText, Rates) {
  EXPECT_EQ(RateText(312e6), "312 MB/s");
  EXPECT_EQ(RateText(512), "512 B/s");
  EXPECT_EQ(RateText(0), "0 B/s");
  EXPECT_EQ(RateText(-5), "0 B/s");
  EXPECT_EQ(RateText(std::numeric_limits<double>::infinity()), "0 B/s");
  EXPECT_EQ(RateText(std::numeric_limits<double>::quiet_NaN()), "0 B/s");
}

TEST(DurationText, MinutesThenHours) {
  EXPECT_EQ(DurationText(0), "0:00");
  EXPECT_EQ(DurationText(4.4), "0:04");
  EXPECT_EQ(DurationText(4.5), "0:05");  // to the nearest second
  EXPECT_EQ(DurationText(59.6), "1:00");
  EXPECT_EQ(DurationText(754), "12:34");
  EXPECT_EQ(DurationText(3600), "1:00:00");
  EXPECT_EQ(DurationText(3 * 3600 + 2 * 60 + 1), "3:02:01");
  EXPECT_EQ(DurationText(99 * 3600 + 59 * 60 + 59), "99:59:59");
  EXPECT_EQ(DurationText(100 * 3600), "--:--");
  EXPECT_EQ(DurationText(-1), "--:--");
  EXPECT_EQ(DurationText(std::numeric_limits<double>::infinity()), "--:--");
}

TEST(ProgressLine, SizesRateEtaAndFile) {
  // 1.16 GB of 2.32 GB in 4 s: 290 MB/s, the other half in 4 s.
  EXPECT_EQ(RenderProgressLine(1'160'000'000, 2'320'000'000, 4, "model-00001-of-00002.safetensors"),
            "[##########          ]  50%  1.16 GB / 2.32 GB  290 MB/s  ETA 0:04  model-00001-of-00002.safetensors");
  // A quarter in 30 s: 90 s to go.
  EXPECT_EQ(RenderProgressLine(250, 1000, 30, "x"), "[#####               ]  25%  250 B / 1.00 kB  8 B/s  ETA 1:30  x");
  EXPECT_EQ(RenderProgressLine(1, 3, 1, ""), "[######              ]  33%  1 B / 3 B  1 B/s  ETA 0:02");
}

TEST(ProgressLine, PercentAndBarFloorSoThatFullMeansEveryByte) {
  EXPECT_EQ(RenderProgressLine(999, 1000, 1, "").substr(0, 27), "[################### ]  99%");
  EXPECT_EQ(RenderProgressLine(1000, 1000, 1, "").substr(0, 27), "[####################] 100%");
}

TEST(ProgressLine, UnknownRateWhileNothingMovedOrNoTimePassed) {
  EXPECT_EQ(RenderProgressLine(0, 1000, 5, ""), "[                    ]   0%  0 B / 1.00 kB  0 B/s  ETA --:--");
  EXPECT_EQ(RenderProgressLine(500, 1000, 0, ""), "[##########          ]  50%  500 B / 1.00 kB  0 B/s  ETA --:--");
  EXPECT_EQ(RenderProgressLine(500, 1000, -1, ""), "[##########          ]  50%  500 B / 1.00 kB  0 B/s  ETA --:--");
}

// The first redraw of a threaded run (a quarter second in) extrapolated whatever its first blocks did: an ETA
// waits for a second and 1% of the bytes.
TEST(ProgressLine, NoEtaBeforeASecondAndOnePercent) {
  EXPECT_EQ(RenderProgressLine(400, 1000, 0.25, ""),
            "[########            ]  40%  400 B / 1.00 kB  1.60 kB/s  ETA --:--");
  EXPECT_EQ(RenderProgressLine(9, 1000, 30, ""), "[                    ]   0%  9 B / 1.00 kB  0 B/s  ETA --:--");
  EXPECT_EQ(RenderProgressLine(400, 1000, 1, ""), "[########            ]  40%  400 B / 1.00 kB  400 B/s  ETA 0:02");
  EXPECT_TRUE(RenderProgressLine(10, 1000, 30, "").ends_with("ETA 49:30"));
}

TEST(ProgressLine, CompleteShowsTheTimeTaken) {
  EXPECT_EQ(RenderProgressLine(2000, 2000, 65, "a"),
            "[####################] 100%  2.00 kB / 2.00 kB  30 B/s  in 1:05  a");
  // More than the total (a total that undercounted) reads as the total.
  EXPECT_EQ(RenderProgressLine(3000, 2000, 1, "").substr(0, 46), "[####################] 100%  2.00 kB / 2.00 kB");
}

TEST(ProgressLine, ZeroTotalIsComplete) {
  EXPECT_EQ(RenderProgressLine(0, 0, 0, "empty.safetensors"),
            "[####################] 100%  0 B / 0 B  0 B/s  in 0:00  empty.safetensors");
}

TEST(ProgressLine, HugeTotalsNeitherOverflowNorClaimCompletion) {
  // done * 100 would overflow 64 bits here: the fraction is computed in double.
  EXPECT_EQ(RenderProgressLine(kMax / 2, kMax, 1000, "").substr(0, 46),
            "[##########          ]  50%  9.22 EB / 18.4 EB");
  EXPECT_EQ(RenderProgressLine(kMax - 1, kMax, 1, "").substr(0, 27), "[################### ]  99%");
  EXPECT_EQ(RenderProgressLine(kMax, kMax, 1, "").substr(0, 27), "[####################] 100%");
  // 9.22 EB at 9.22 EB/s: one second to go.
  EXPECT_NE(RenderProgressLine(kMax / 2, kMax, 1, "").find("9.22 EB/s  ETA 0:01"), std::string::npos);
}

TEST(ProgressLine, FileNamesAreMadePrintableAndShortenedFromTheLeft) {
  EXPECT_EQ(RenderProgressLine(0, 0, 0, "a\x1b[2Jb"),
            "[####################] 100%  0 B / 0 B  0 B/s  in 0:00  a\\x1B[2Jb");
  const std::string name = std::string(60, 'n') + "-00007-of-00009.safetensors";
  const std::string line = RenderProgressLine(0, 0, 0, name);
  const std::string shown = line.substr(line.rfind("  ") + 2);
  EXPECT_EQ(shown.size(), 48u);
  EXPECT_EQ(shown.substr(0, 3), "...");
  EXPECT_EQ(shown.substr(shown.size() - 27), "-00007-of-00009.safetensors");
}

ProgressSettings Shown() { return {.shown = true, .fixed_seconds = std::nullopt}; }

TEST(ProgressMeter, EachFileStartDrawsAtOnce) {
  ProgressMeter m(300, Shown());
  EXPECT_EQ(m.StartFile("a", 0, 0), "\r" + RenderProgressLine(0, 300, 0, "a"));
  EXPECT_EQ(m.StartFile("b", 100, 0.01), "\r" + RenderProgressLine(100, 300, 0.01, "b"));
}

TEST(ProgressMeter, RedrawsEveryQuarterSecondWhileBytesMove) {
  ProgressMeter m(1000, Shown());
  m.StartFile("a", 0, 0);
  EXPECT_FALSE(m.RedrawDue(10, 0.1));
  EXPECT_EQ(m.Update(10, 0.1), "");
  EXPECT_EQ(m.Update(20, 0.2499), "");
  EXPECT_TRUE(m.RedrawDue(30, 0.25));
  EXPECT_EQ(m.Update(30, 0.25), "\r" + RenderProgressLine(30, 1000, 0.25, "a"));
  EXPECT_EQ(m.Update(40, 0.4), "");  // 0.15 s since the last redraw
  EXPECT_NE(m.Update(50, 0.5), "");
  EXPECT_EQ(m.Update(50, 2), "");  // nothing moved
  EXPECT_FALSE(m.RedrawDue(50, 10));
  EXPECT_EQ(m.Update(60, 0.3), "");  // a clock going back does not redraw
}

TEST(ProgressMeter, ReachingTheTotalRedrawsAtOnceAndFinishDoesNotRepeatIt) {
  ProgressMeter m(100, Shown());
  m.StartFile("a", 0, 0);
  EXPECT_EQ(m.Update(100, 0.01), "\r" + RenderProgressLine(100, 100, 0.01, "a"));
  EXPECT_EQ(m.Update(100, 1), "");
  EXPECT_EQ(m.Finish(1), "\n");
  EXPECT_EQ(m.Abandon(), "");  // the line is ended already
}

TEST(ProgressMeter, FinishDrawsTheTotalWhenUpdatesFellShort) {
  // The bytes counted may stop short of the total (gaps between tensors are not read): the work is done anyway.
  ProgressMeter m(100, Shown());
  m.StartFile("a", 0, 0);
  m.Update(90, 1);
  EXPECT_EQ(m.Finish(2), "\r" + RenderProgressLine(100, 100, 2, "a") + "\n");
}

TEST(ProgressMeter, AShorterLineIsPaddedOverTheLongerOne) {
  ProgressMeter m(1000, Shown());
  const std::string first = m.StartFile("a-rather-long-file-name.safetensors", 0, 0);
  const std::string second = m.StartFile("b", 0, 0);
  const std::string line = RenderProgressLine(0, 1000, 0, "b");
  EXPECT_EQ(second, "\r" + line + std::string(first.size() - 1 - line.size(), ' '));
  EXPECT_EQ(m.StartFile("c", 0, 0), "\r" + line.substr(0, line.size() - 1) + "c");  // was as long: no padding
}

TEST(ProgressMeter, AbandonEndsALineOnTheScreen) {
  ProgressMeter m(100, Shown());
  EXPECT_EQ(m.Abandon(), "");  // nothing drawn
  m.StartFile("a", 0, 0);
  EXPECT_EQ(m.Abandon(), "\n");
  EXPECT_EQ(m.Abandon(), "");
}

TEST(ProgressMeter, AFixedClockMakesEveryLineTheSame) {
  // Whatever elapsed times the edge passes, the lines read the fixed one: no time-based redraw ever falls due,
  // so the lines drawn are the file starts and the end, identical in both CLIs whatever their read sizes.
  ProgressMeter m(1000, {.shown = true, .fixed_seconds = 2.5});
  EXPECT_EQ(m.StartFile("a", 0, 0.123), "\r" + RenderProgressLine(0, 1000, 2.5, "a"));
  EXPECT_EQ(m.Update(400, 7), "");
  EXPECT_EQ(m.Update(500, 70), "");
  EXPECT_EQ(m.StartFile("b", 500, 9), "\r" + RenderProgressLine(500, 1000, 2.5, "b"));
  EXPECT_EQ(m.Finish(11), "\r" + RenderProgressLine(1000, 1000, 2.5, "b") + "\n");
}

TEST(ProgressMeter, HiddenDrawsNothing) {
  ProgressMeter m(100, {});
  EXPECT_EQ(m.StartFile("a", 0, 0), "");
  EXPECT_EQ(m.Update(100, 1), "");
  EXPECT_EQ(m.Finish(1), "");
  EXPECT_EQ(m.Abandon(), "");
}

TEST(ProgressMeter, ZeroTotal) {
  ProgressMeter m(0, Shown());
  EXPECT_EQ(m.StartFile("a", 0, 0), "\r" + RenderProgressLine(0, 0, 0, "a"));
  EXPECT_EQ(m.Update(0, 1), "");
  EXPECT_EQ(m.Finish(1), "\n");  // complete from the start
}

TEST(ProgressSettings, ShownOnATerminalUnlessJsonQuietOrNoProgress) {
  ProgressEnvironment tty{.stderr_is_terminal = true};
  EXPECT_TRUE(ProgressSettingsFor(tty).shown);
  EXPECT_FALSE(ProgressSettingsFor({}).shown);
  for (auto off : {&ProgressEnvironment::json, &ProgressEnvironment::quiet, &ProgressEnvironment::no_progress}) {
    ProgressEnvironment e = tty;
    e.*off = true;
    EXPECT_FALSE(ProgressSettingsFor(e).shown);
    e.progress_variable = "always";  // forcing replaces the terminal, not the user's options
    EXPECT_FALSE(ProgressSettingsFor(e).shown);
  }
}

TEST(ProgressLine, SeveralFilesAtOnceAreCountedNotNamed) {
  EXPECT_EQ(FilesAtOnceLabel(2), "2 files at once");
  EXPECT_EQ(RenderProgressLine(50, 100, 2, FilesAtOnceLabel(3)),
            "[##########          ]  50%  50 B / 100 B  25 B/s  ETA 0:02  3 files at once");
}

TEST(ProgressSettings, PbProgressAlwaysForcesItWithoutATerminal) {
  EXPECT_TRUE(ProgressSettingsFor({.progress_variable = "always"}).shown);
  EXPECT_FALSE(ProgressSettingsFor({.progress_variable = "yes"}).shown);
  EXPECT_FALSE(ProgressSettingsFor({.progress_variable = ""}).shown);
}

TEST(ProgressSettings, TheFixedClockIsWholeMilliseconds) {
  EXPECT_EQ(ProgressSettingsFor({.clock_variable = "2500"}).fixed_seconds, 2.5);
  EXPECT_EQ(ProgressSettingsFor({.clock_variable = "0"}).fixed_seconds, 0.0);
  EXPECT_EQ(ProgressSettingsFor({}).fixed_seconds, std::nullopt);
  for (const char* bad : {"", "2.5", "-1", "1e3", " 1", "1 ", "0x10", "1234567890123"})
    EXPECT_EQ(ProgressSettingsFor({.clock_variable = bad}).fixed_seconds, std::nullopt) << bad;
}

// The time part alone, as the page shows it beside its bar: the line's own words.
TEST(ProgressTimeText, TheLinesTime) {
  EXPECT_EQ(ProgressTimeText(0, 100, 0), "ETA --:--");
  EXPECT_EQ(ProgressTimeText(25, 100, 5), "ETA 0:15");
  EXPECT_EQ(ProgressTimeText(100, 100, 12.2), "in 0:12");
  EXPECT_EQ(ProgressTimeText(0, 0, 3), "in 0:03");
  const std::string line = RenderProgressLine(25, 100, 5, "");
  EXPECT_EQ(line.substr(line.size() - 8), "ETA 0:15");
}

}  // namespace
}  // namespace pb::app
