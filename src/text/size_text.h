// The one human size format of every text the CLIs print (reports, summaries, the progress line): decimal units,
// three significant digits ("512 B", "1.16 GB", "11.6 GB", "116 GB"). Exact byte counts belong in --json.
#pragma once

#include <cstdint>
#include <string>

namespace pb::text {

// `bytes` as "N B" below 1000, else three significant digits in kB, MB, GB, TB, PB or EB.
std::string SizeText(uint64_t bytes);

// A rate in the same format: "312 MB/s" ("0 B/s" for a rate that is not positive or not finite).
std::string RateText(double bytes_per_second);

}  // namespace pb::text
