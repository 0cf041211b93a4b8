#include "compose/combine_options.h"

#include <array>
#include <utility>

namespace pb::compose {
namespace {

constexpr std::array<std::pair<CombineMethod, std::string_view>, 11> kNames = {{
    {CombineMethod::kCat, "cat"},
    {CombineMethod::kLinear, "linear"},
    {CombineMethod::kSvd, "svd"},
    {CombineMethod::kTies, "ties"},
    {CombineMethod::kTiesSvd, "ties_svd"},
    {CombineMethod::kDareLinear, "dare_linear"},
    {CombineMethod::kDareTies, "dare_ties"},
    {CombineMethod::kDareLinearSvd, "dare_linear_svd"},
    {CombineMethod::kDareTiesSvd, "dare_ties_svd"},
    {CombineMethod::kMagnitudePrune, "magnitude_prune"},
    {CombineMethod::kMagnitudePruneSvd, "magnitude_prune_svd"},
}};

}  // namespace

std::optional<CombineMethod> ParseCombineMethod(std::string_view name) {
  for (const auto& [m, n] : kNames)
    if (n == name) return m;
  return std::nullopt;
}

std::string_view CombineMethodName(CombineMethod method) {
  for (const auto& [m, n] : kNames)
    if (m == method) return n;
  return "?";
}

const std::vector<std::string_view>& CombineMethodNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [m, n] : kNames) v.push_back(n);
    return v;
  }();
  return names;
}

bool IsSvdMethod(CombineMethod m) {
  return m == CombineMethod::kSvd || m == CombineMethod::kTiesSvd || m == CombineMethod::kDareLinearSvd ||
         m == CombineMethod::kDareTiesSvd || m == CombineMethod::kMagnitudePruneSvd;
}

bool NeedsDensity(CombineMethod m) {
  return m != CombineMethod::kCat && m != CombineMethod::kLinear && m != CombineMethod::kSvd;
}

bool IsRandomMethod(CombineMethod m) {
  return m == CombineMethod::kDareLinear || m == CombineMethod::kDareTies || m == CombineMethod::kDareLinearSvd ||
         m == CombineMethod::kDareTiesSvd;
}

bool UsesMajoritySign(CombineMethod m) {
  return m == CombineMethod::kTies || m == CombineMethod::kTiesSvd || m == CombineMethod::kDareTies ||
         m == CombineMethod::kDareTiesSvd;
}

bool CombinesFactorsSeparately(CombineMethod m, bool peft_compat) {
  return (m == CombineMethod::kLinear && peft_compat) || m == CombineMethod::kTies || m == CombineMethod::kDareLinear ||
         m == CombineMethod::kDareTies || m == CombineMethod::kMagnitudePrune;
}

}  // namespace pb::compose
