// The native CLI's `merge` against PEFT's own merge_and_unload() on the golden corpus (tests/golden): every
// tensor of PEFT's merged model, per case, bit for bit or within the manifest's tolerance for that tensor
// (tests/golden/README.md says why each tolerance is what it is). No Python: the corpus is committed.
#ifdef PB_CLI_PATH
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

namespace pb::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(PB_SOURCE_DIR) / "tests" / "golden";

json Manifest() {
  std::ifstream in(kGolden / "MANIFEST.json");
  return json::parse(in);
}

struct StoredTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Every tensor of one .safetensors file into `out` (a plain reading of the format, independent of the library).
void ReadFile(const fs::path& file, std::map<std::string, StoredTensor>& out) {
  std::ifstream in(file, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  std::memcpy(&n, data.data(), 8);
  json header = json::parse(data.substr(8, n));
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    uint64_t b = info["data_offsets"][0], e = info["data_offsets"][1];
    out[name] = {info["dtype"], info["shape"].get<std::vector<int64_t>>(), data.substr(8 + n + b, e - b)};
  }
}

// Every tensor of every .safetensors file in `dir`.
std::map<std::string, StoredTensor> ReadFolder(const fs::path& dir) {
  std::map<std::string, StoredTensor> out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") ReadFile(entry.path(), out);
  return out;
}

// Bits of element i as an integer whose order is the float order (so a difference counts ulps), and its value.
int64_t Ordered(const StoredTensor& t, size_t i) {
  if (t.dtype == "F32") {
    int32_t v;
    std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    return v < 0 ? -static_cast<int64_t>(v & 0x7FFFFFFF) : v;
  }
  int16_t v;
  std::memcpy(&v, t.bytes.data() + 2 * i, 2);
  return v < 0 ? -static_cast<int64_t>(v & 0x7FFF) : v;
}

double Value(const StoredTensor& t, size_t i) {
  uint32_t bits = 0;
  if (t.dtype == "F32") {
    std::memcpy(&bits, t.bytes.data() + 4 * i, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, t.bytes.data() + 2 * i, 2);
    if (t.dtype == "BF16") {
      bits = static_cast<uint32_t>(h) << 16;
    } else {  // F16
      int exp = (h >> 10) & 0x1F, man = h & 0x3FF;
      double v = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? INFINITY : std::ldexp(man + 1024, exp - 25);
      return (h & 0x8000) ? -v : v;
    }
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

size_t ElementSize(const std::string& dtype) { return dtype == "F32" ? 4 : dtype == "BF16" || dtype == "F16" ? 2 : 1; }

int RunMerge(const fs::path& base, const fs::path& adapter, const fs::path& out) {
  std::string cmd = std::string(PB_CLI_PATH) + " merge --base '" + base.string() + "' --adapter '" + adapter.string() +
                    "' --out '" + out.string() + "' >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int RunUnmerge(const fs::path& merged, const fs::path& adapter, const fs::path& out) {
  std::string cmd = std::string(PB_CLI_PATH) + " unmerge --base '" + merged.string() + "' --adapter '" +
                    adapter.string() + "' --out '" + out.string() + "' >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct Comparison {
  std::string mismatch;  // empty when every tensor is within its tolerance
  uint64_t total = 0, identical = 0;
  int64_t worst = 0;
};

// Our tensors `got` against PEFT's `want`, name for name: bit-identical, or within the manifest's max_ulp / abs_tol
// for the tensors `tolerances` lists (changed_tensors).
Comparison Compare(const std::map<std::string, StoredTensor>& want, const std::map<std::string, StoredTensor>& got,
                   const json& tolerances) {
  Comparison c;
  for (const auto& [name, _] : got)
    if (!want.count(name)) c.mismatch += "extra tensor " + name + "; ";
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      c.mismatch += "missing tensor " + name + "; ";
      continue;
    }
    const StoredTensor& g = it->second;
    if (g.dtype != w.dtype || g.shape != w.shape || g.bytes.size() != w.bytes.size()) {
      c.mismatch += name + ": dtype/shape " + g.dtype + " vs PEFT's " + w.dtype + "; ";
      continue;
    }
    int64_t max_ulp = 0;
    double abs_tol = 0;
    if (tolerances.contains(name)) {
      max_ulp = tolerances[name]["max_ulp"];
      abs_tol = tolerances[name]["abs_tol"];
    }
    const size_t count = w.bytes.size() / ElementSize(w.dtype);
    uint64_t bad = 0;
    int64_t tensor_worst = 0;
    for (size_t i = 0; i < count; ++i) {
      ++c.total;
      if (g.dtype == "F32" || g.dtype == "BF16" || g.dtype == "F16") {
        int64_t ulp = std::llabs(Ordered(g, i) - Ordered(w, i));
        if (ulp == 0) {
          ++c.identical;
          continue;
        }
        tensor_worst = std::max(tensor_worst, ulp);
        if (ulp > max_ulp && std::fabs(Value(g, i) - Value(w, i)) > abs_tol) ++bad;
      } else if (std::memcmp(g.bytes.data() + i * ElementSize(g.dtype), w.bytes.data() + i * ElementSize(w.dtype),
                             ElementSize(g.dtype)) == 0) {
        ++c.identical;
      } else {
        ++bad;
      }
    }
    c.worst = std::max(c.worst, tensor_worst);
    if (bad)
      c.mismatch += name + ": " + std::to_string(bad) + " of " + std::to_string(count) + " elements beyond " +
                    std::to_string(max_ulp) + " ulp (worst " + std::to_string(tensor_worst) + "); ";
  }
  return c;
}

json CaseItem(const std::string& name) {
  json manifest = Manifest();
  for (const auto& c : manifest["cases"])
    if (c["name"] == name) return c;
  return nullptr;
}

fs::path TempPath(const std::string& what, const std::string& name) {
  return fs::temp_directory_path() / ("pb_golden_" + what + name + "_" + std::to_string(::getpid()));
}

class GoldenMerge : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenMerge, EqualsPeftMergeAndUnload) {
  const json item = CaseItem(GetParam());
  ASSERT_FALSE(item.is_null());
  const fs::path dir = kGolden / "corpus" / GetParam();
  const fs::path out = TempPath("", GetParam());
  fs::remove_all(out);
  int status = RunMerge(dir / "base", dir / "adapter", out);
  const bool known = item.contains("known_failure");

  Comparison c;
  if (status == 0) c = Compare(ReadFolder(dir / "peft_merged"), ReadFolder(out), item["changed_tensors"]);
  fs::remove_all(out);
  std::string verdict = status != 0 ? "merge refused (exit " + std::to_string(status) + ")" : c.mismatch;
  std::printf("golden %s [%s]: %s%llu/%llu elements identical to PEFT, worst %lld ulp\n", GetParam().c_str(),
              item["dtype"].get<std::string>().c_str(), verdict.empty() ? "" : (verdict + " - ").c_str(),
              static_cast<unsigned long long>(c.identical), static_cast<unsigned long long>(c.total),
              static_cast<long long>(c.worst));
  if (known) {
    // A listed failure must still fail: once it is fixed, its entry in the manifest goes.
    EXPECT_FALSE(verdict.empty()) << "listed as a known failure but now agrees with PEFT: "
                                  << item["known_failure"].dump();
  } else {
    EXPECT_TRUE(verdict.empty()) << verdict;
  }
}

// `unmerge` of our merge against PEFT's unmerge (merge_adapter() then unmerge_adapter(), `W -= delta.to(W.dtype)`):
// the tensors PEFT's merge changed equal peft_unmerged.safetensors within the manifest's unmerge tolerance for them
// (the merge's, plus one ulp for the rounded delta where the merge is not bit-identical), every other tensor is the
// base's bit for bit. Where the manifest says our unmerge is refused (DoRA, copies, trainable tokens:
// the adapter does not keep what they overwrote), it must be.
class GoldenUnmerge : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenUnmerge, UnmergeOfOurMergeEqualsPeftUnmerge) {
  const json item = CaseItem(GetParam());
  ASSERT_TRUE(item.contains("unmerge")) << "generate.py --unmerged " << GetParam();
  const fs::path dir = kGolden / "corpus" / GetParam();
  const fs::path merged = TempPath("m_", GetParam()), out = TempPath("u_", GetParam());
  fs::remove_all(merged);
  fs::remove_all(out);
  if (item["unmerge"].contains("refused")) {
    EXPECT_NE(RunUnmerge(dir / "peft_merged", dir / "adapter", out), 0)
        << "unmerge must be refused: " << item["unmerge"]["refused"].get<std::string>();
    EXPECT_FALSE(fs::exists(out));
    std::printf("golden unmerge %s: refused (%s)\n", GetParam().c_str(),
                item["unmerge"]["refused"].get<std::string>().c_str());
    return;
  }
  ASSERT_EQ(RunMerge(dir / "base", dir / "adapter", merged), 0);
  ASSERT_EQ(RunUnmerge(merged, dir / "adapter", out), 0);
  // PEFT's unmerged model: the base, with the tensors its merge changed as PEFT's unmerge left them.
  auto want = ReadFolder(dir / "base");
  std::map<std::string, StoredTensor> changed;
  ReadFile(dir / "peft_unmerged.safetensors", changed);
  for (auto& [name, t] : changed) want[name] = t;
  Comparison c = Compare(want, ReadFolder(out), item["unmerge"]["changed_tensors"]);
  fs::remove_all(merged);
  fs::remove_all(out);
  std::printf("golden unmerge %s [%s]: %s%llu/%llu elements identical to PEFT's unmerge, worst %lld ulp\n",
              GetParam().c_str(), item["dtype"].get<std::string>().c_str(),
              c.mismatch.empty() ? "" : (c.mismatch + " - ").c_str(), static_cast<unsigned long long>(c.identical),
              static_cast<unsigned long long>(c.total), static_cast<long long>(c.worst));
  EXPECT_EQ(changed.size(), item["unmerge"]["tensors"].get<size_t>());
  EXPECT_TRUE(c.mismatch.empty()) << c.mismatch;
}

int RunCli(const std::string& args) {
  std::string cmd = std::string(PB_CLI_PATH) + " " + args + " >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Every architecture case (a tiny model of each naming table's architectures): `translate --to F` then back
// `--to peft` gives PEFT's own adapter tensors bit for bit, for each format the table can spell, and the
// formats it cannot spell (gguf-names where llama.cpp has no name for a module) are refused.
class GoldenTranslate : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTranslate, RoundTripsThroughEachFormat) {
  json manifest = Manifest();
  json item;
  for (const auto& c : manifest["cases"])
    if (c["name"] == GetParam()) item = c;
  ASSERT_TRUE(item.contains("translate"));
  const fs::path dir = kGolden / "corpus" / GetParam();
  const fs::path tmp = fs::temp_directory_path() / ("pb_golden_tr_" + GetParam() + "_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string config = " --base-config " + Quoted(dir / "base" / "config.json") + " -q";
  const auto original = ReadFolder(dir / "adapter");
  for (const auto& [format, want] : item["translate"].items()) {
    const fs::path mid = tmp / format, back = tmp / (format + "-peft");
    int to = RunCli("translate " + Quoted(dir / "adapter") + " " + Quoted(mid) + " --to " + format + config);
    if (want == "refused") {
      EXPECT_NE(to, 0) << format << ": the table has no name for some module, so the translation must be refused";
      continue;
    }
    ASSERT_EQ(to, 0) << "translate --to " << format;
    ASSERT_EQ(RunCli("translate " + Quoted(mid) + " " + Quoted(back) + " --to peft" + config), 0)
        << format << " --to peft";
    const auto got = ReadFolder(back);
    EXPECT_EQ(got.size(), original.size()) << format;
    for (const auto& [name, w] : original) {
      auto it = got.find(name);
      if (it == got.end()) {
        ADD_FAILURE() << format << ": round trip lost " << name;
        continue;
      }
      EXPECT_TRUE(it->second.dtype == w.dtype && it->second.shape == w.shape && it->second.bytes == w.bytes)
          << format << ": " << name << " is not PEFT's tensor bit for bit after the round trip";
    }
    std::printf("golden %s: peft -> %s -> peft: %zu tensors\n", GetParam().c_str(), format.c_str(), got.size());
  }
  fs::remove_all(tmp);
}

std::vector<std::string> TranslateCaseNames() {
  std::vector<std::string> names;
  const json manifest = Manifest();
  for (const auto& c : manifest["cases"])
    if (c.contains("translate")) names.push_back(c["name"]);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Corpus, GoldenTranslate, ::testing::ValuesIn(TranslateCaseNames()),
                         [](const auto& info) { return info.param; });

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  const json manifest = Manifest();  // held: a range-for over Manifest()["cases"] would dangle
  for (const auto& c : manifest["cases"]) names.push_back(c["name"]);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Corpus, GoldenMerge, ::testing::ValuesIn(CaseNames()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Corpus, GoldenUnmerge, ::testing::ValuesIn(CaseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pb::testing
#endif
