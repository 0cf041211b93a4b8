// Which server an edge worker may read from (net/worker_endpoint.h): its own Hub, an origin the deployment lists,
// nothing else; origins compared as the adapter cache compares them (UrlOrigin). The router's end-to-end test
// (tests/js/adapter-router.test.mjs) shows the worker follows it.
#include <gtest/gtest.h>

#include "net/http_url.h"
#include "net/worker_endpoint.h"

namespace pb::net {
namespace {

constexpr std::string_view kHub = "https://hub.example/";

TEST(WorkerEndpoint, NoneOrTheSameOriginIsTheWorkersOwn) {
  for (std::optional<std::string_view> asked : {std::optional<std::string_view>{}, std::optional<std::string_view>{""},
                                                std::optional<std::string_view>{"https://HUB.example:443/some/path"},
                                                std::optional<std::string_view>{"https://hub.example"}}) {
    auto r = ChooseWorkerEndpoint(asked, kHub, "");
    ASSERT_TRUE(r.ok()) << (asked ? *asked : "none");
    EXPECT_TRUE(r->own);
    EXPECT_EQ(r->endpoint, kHub);  // the endpoint as configured, path and all
  }
}

TEST(WorkerEndpoint, AListedOriginIsAllowedButNotOwn) {
  auto r = ChooseWorkerEndpoint("http://Mirror.example:80/x", kHub, "https://a.example, http://mirror.example\tb");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->own);
  EXPECT_EQ(r->endpoint, "http://mirror.example");
}

TEST(WorkerEndpoint, AnythingElseIsRefusedNamingWhatIsAllowed) {
  auto r = ChooseWorkerEndpoint("https://evil.example", kHub, "https://a.example");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(r.error().message,
            "`endpoint` `https://evil.example` is not allowed: this worker reads from its Hub (https://hub.example) "
            "and https://a.example only (ALLOWED_ENDPOINTS lists other servers)");
  // Another scheme, user info, another port, no host: never the worker's own, never listed.
  for (std::string_view asked : {"file:///etc/passwd", "https://user:pw@hub.example", "https://hub.example:444",
                                 "https://", "hub.example", "ftp://a.example"}) {
    auto refused = ChooseWorkerEndpoint(asked, kHub, "https://a.example ftp://a.example");
    EXPECT_FALSE(refused.ok()) << asked;
  }
}

TEST(WorkerEndpoint, AnUnusableAllowListEntryIsNamed) {
  auto r = ChooseWorkerEndpoint("https://b.example", kHub, "b.example,,ftp://c.example");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "`endpoint` `https://b.example` is not allowed: this worker reads from its Hub (https://hub.example) "
            "only (ALLOWED_ENDPOINTS lists other servers; its entries `b.example`, `ftp://c.example` are not "
            "http(s) URLs)");
}

TEST(WorkerEndpoint, AHomeThatIsNoHttpUrlIsRefused) {
  for (std::string_view home : {"", "hub.example", "file:///x", "https://u:p@hub.example"}) {
    auto r = ChooseWorkerEndpoint(std::nullopt, home, "");
    ASSERT_FALSE(r.ok()) << home;
    EXPECT_NE(r.error().message.find("is not an http(s) URL"), std::string::npos);
  }
}

TEST(WorkerEndpoint, AHugeRequestIsClippedInTheMessage) {
  const std::string asked = "https://" + std::string(100000, 'a') + ".example";
  auto r = ChooseWorkerEndpoint(asked, kHub, "");
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.error().message.size(), 600u);
}

TEST(WorkerEndpoint, ALongConfigurationMakesNoLongMessage) {
  // The home origin and every listed origin are echoed clipped, at most eight of each kind (found by
  // fuzz_http_policy: a 21,446-character host made a 43 KB refusal).
  const std::string host(20000, 'h');
  std::string allowed;
  for (int i = 0; i < 50; ++i)
    allowed += "https://" + host + std::to_string(i) + ".example, bad" + std::to_string(i) + " ";
  auto r = ChooseWorkerEndpoint("https://evil.example", "https://" + host + ".example", allowed);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.error().message.size(), 4000u) << r.error().message.substr(0, 300);
  EXPECT_NE(r.error().message.find(" and 42 more only (ALLOWED_ENDPOINTS"), std::string::npos);
  EXPECT_NE(r.error().message.find("`bad7` and 42 more are not http(s) URLs"), std::string::npos);
}

TEST(WorkerEndpoint, OwnExactlyWhereTheCacheSendsItsToken) {
  // The adapter cache sends its token where UrlOrigin(endpoint) equals UrlOrigin(its own): the same comparison.
  for (std::string_view asked : {"https://hub.example", "https://HUB.EXAMPLE:443", "http://hub.example",
                                 "https://hub.example:8443", "https://hub.example.evil"}) {
    auto r = ChooseWorkerEndpoint(asked, kHub, "http://hub.example https://hub.example:8443 https://hub.example.evil");
    ASSERT_TRUE(r.ok()) << asked;
    EXPECT_EQ(r->own, UrlOrigin(asked) == UrlOrigin(kHub)) << asked;
  }
}

}  // namespace
}  // namespace pb::net
