// The native --push-to's sans-I/O pieces: SHA-256 (FIPS 180-4 vectors), base64, and the commit API's bodies,
// answers and URLs (src/net/hub_commit.h) as @huggingface/hub sends and reads them.
#include "net/hub_commit.h"

#include <gtest/gtest.h>

#include <string>

#include "net/sha256.h"

namespace pb::net {
namespace {

std::span<const uint8_t> Bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(Sha256, Vectors) {
  EXPECT_EQ(Sha256Hex(Bytes("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(Bytes("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(Bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // a million 'a's, fed in uneven pieces
  std::string a(1'000'000, 'a');
  Sha256 s;
  for (size_t at = 0, step = 1; at < a.size(); at += step, step = step * 3 % 997 + 1)
    s.Update(Bytes(std::string_view(a).substr(at, std::min(step, a.size() - at))));
  EXPECT_EQ(s.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  for (size_t n : {55, 56, 63, 64, 65, 119, 120}) EXPECT_EQ(Sha256Hex(Bytes(std::string(n, 'x'))).size(), 64u) << n;
}

TEST(HubCommit, Base64) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64(std::string("\xff\x00\x80", 3)), "/wCA");
}

TEST(HubCommit, Urls) {
  auto u = MakeHubCommitUrls("http://hub", "me/m", "refs/pr/1", true);
  EXPECT_EQ(u.preupload, "http://hub/api/models/me/m/preupload/refs%2Fpr%2F1?create_pr=1");
  EXPECT_EQ(u.commit, "http://hub/api/models/me/m/commit/refs%2Fpr%2F1?create_pr=1");
  EXPECT_EQ(u.lfs_batch, "http://hub/me/m.git/info/lfs/objects/batch");
  EXPECT_EQ(u.create_repo, "http://hub/api/repos/create");
  EXPECT_EQ(MakeHubCommitUrls("http://hub", "me/m", "dev", false).branch, "http://hub/api/models/me/m/branch/dev");
}

TEST(HubCommit, Bodies) {
  EXPECT_EQ(PreuploadRequestJson({{"a.json", 2, "{}"}}), R"({"files":[{"path":"a.json","sample":"e30=","size":2}]})");
  EXPECT_EQ(
      LfsBatchRequestJson({{"ab", 3}}, "main"),
      R"({"hash_algo":"sha_256","objects":[{"oid":"ab","size":3}],"operation":"upload","ref":{"name":"main"},"transfers":["basic","multipart"]})");
  EXPECT_EQ(MultipartCompletionJson("ab", {"\"e1\"", "\"e2\""}),
            R"({"oid":"ab","parts":[{"etag":"\"e1\"","partNumber":1},{"etag":"\"e2\"","partNumber":2}]})");
  EXPECT_EQ(
      CommitNdjson("t", "", {{"w.safetensors", true, "ab", 3, {}}, {"c.json", false, {}, 0, "{}"}}),
      "{\"key\":\"header\",\"value\":{\"summary\":\"t\"}}\n"
      "{\"key\":\"lfsFile\",\"value\":{\"algo\":\"sha256\",\"oid\":\"ab\",\"path\":\"w.safetensors\",\"size\":3}}\n"
      "{\"key\":\"file\",\"value\":{\"content\":\"e30=\",\"encoding\":\"base64\",\"path\":\"c.json\"}}");
}

TEST(HubCommit, Answers) {
  auto lfs =
      ParsePreuploadLfsPaths(R"({"files":[{"path":"a","uploadMode":"lfs"},{"path":"b","uploadMode":"regular"}]})");
  ASSERT_TRUE(lfs.ok());
  EXPECT_EQ(lfs.value(), std::vector<std::string>{"a"});
  EXPECT_FALSE(ParsePreuploadLfsPaths("[]").ok());
  auto batch =
      ParseLfsBatch(R"({"objects":[{"oid":"x","size":1},{"oid":"y","size":9,"actions":{"upload":{"href":"put-y"}}},
    {"oid":"z","size":9,"actions":{"upload":{"href":"done-z","header":{"chunk_size":"5","00002":"p2","00001":"p1"}}}}]})");
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  ASSERT_EQ(batch->size(), 3u);
  EXPECT_FALSE(batch.value()[0].needed);
  EXPECT_EQ(batch.value()[1].href, "put-y");
  EXPECT_EQ(batch.value()[1].chunk_size, 0u);
  EXPECT_EQ(batch.value()[2].chunk_size, 5u);
  EXPECT_EQ(batch.value()[2].part_urls, (std::vector<std::string>{"p1", "p2"}));
  auto refused = ParseLfsBatch(R"({"objects":[{"oid":"x","error":{"code":422,"message":"too big"}}]})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "the Hub refused LFS object x: too big");
  EXPECT_FALSE(
      ParseLfsBatch(
          R"({"objects":[{"oid":"z","actions":{"upload":{"href":"h","header":{"chunk_size":"5","00002":"p2"}}}}]})")
          .ok());
  auto commit = ParseCommitAnswer(R"({"commitOid":"c1","commitUrl":"u","pullRequestUrl":"pr"})");
  ASSERT_TRUE(commit.ok());
  EXPECT_EQ(commit->commit_oid, "c1");
  EXPECT_EQ(commit->pull_request_url, "pr");
  EXPECT_EQ(HubErrorText(403, R"({"error":"no rights"})", ""), "no rights (HTTP 403)");
  EXPECT_EQ(HubErrorText(500, "oops", "Injected failure"), "Injected failure (HTTP 500)");
  EXPECT_EQ(HubErrorText(502, "", ""), "HTTP 502");
}

}  // namespace
}  // namespace pb::net
