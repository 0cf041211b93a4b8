// What a remote argument names and which files of a remote model are read (net/remote_address.h,
// app/base_layout.h, the multi-file inspect report): the rules both CLIs share.
#include "net/remote_address.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "app/base_layout.h"
#include "app/report.h"

namespace pb::app {
namespace {

// The addresses are the network layer's (net/), the choice of files in them the command layer's (app/).
using namespace ::pb::net;

constexpr std::string_view kEndpoint = "http://hub.test:8080/";

TEST(RemoteAddress, RepoAloneOrWithAFolderIsAFolderListedByTheTreeApi) {
  auto repo = ParseRemoteAddress("hf://me/adapter", kEndpoint);
  ASSERT_TRUE(repo.ok());
  EXPECT_TRUE(repo->folder);
  EXPECT_TRUE(repo->hub);
  EXPECT_EQ(repo->url, "http://hub.test:8080/api/models/me/adapter/tree/main");
  EXPECT_EQ(repo->label, "hf://me/adapter");
  auto sub = ParseRemoteAddress("hf://me/adapter/sub dir/v1@refs/pr/1", kEndpoint);
  ASSERT_TRUE(sub.ok());
  EXPECT_TRUE(sub->folder);
  EXPECT_EQ(sub->revision, "refs/pr/1");
  EXPECT_EQ(sub->url, "http://hub.test:8080/api/models/me/adapter/tree/refs%2Fpr%2F1/sub%20dir/v1");
  auto at_rev = ParseRemoteAddress("hf://me/adapter@v2", kEndpoint);
  ASSERT_TRUE(at_rev.ok());
  EXPECT_TRUE(at_rev->folder);
  EXPECT_EQ(at_rev->repo, "me/adapter");
  EXPECT_EQ(at_rev->url, "http://hub.test:8080/api/models/me/adapter/tree/v2");
}

TEST(RemoteAddress, AFileByItsSuffixResolvesLikeTheHub) {
  for (std::string_view name : {"model.safetensors", "model.safetensors.index.json", "adapter_model.bin"}) {
    auto file = ParseRemoteAddress("hf://me/m/" + std::string(name), kEndpoint);
    ASSERT_TRUE(file.ok());
    EXPECT_FALSE(file->folder) << name;
    EXPECT_EQ(file->url, "http://hub.test:8080/me/m/resolve/main/" + std::string(name));
    EXPECT_EQ(RemoteFileName(file.value()), name);
  }
}

TEST(RemoteAddress, EntriesSitInTheFolderOrBesideTheFileAtThePinnedCommit) {
  auto folder = ParseRemoteAddress("hf://me/m/sub", kEndpoint);
  ASSERT_TRUE(folder.ok());
  RemoteFile shard = RemoteEntry(folder.value(), "model-00001-of-00002.safetensors", std::string("abc123"));
  EXPECT_EQ(shard.url, "http://hub.test:8080/me/m/resolve/abc123/sub/model-00001-of-00002.safetensors");
  EXPECT_EQ(shard.label, "hf://me/m/sub/model-00001-of-00002.safetensors");
  auto file = ParseRemoteAddress("hf://me/m/sub/model.safetensors.index.json@dev", kEndpoint);
  ASSERT_TRUE(file.ok());
  RemoteFile beside = RemoteEntry(file.value(), "a.safetensors");
  EXPECT_EQ(beside.url, "http://hub.test:8080/me/m/resolve/dev/sub/a.safetensors");
  EXPECT_EQ(beside.label, "hf://me/m/sub/a.safetensors@dev");
  auto url = ParseRemoteAddress("https://cdn.test/x/y/adapter_model.safetensors?download=1", kEndpoint);
  ASSERT_TRUE(url.ok());
  EXPECT_FALSE(url->folder);
  EXPECT_EQ(RemoteFileName(url.value()), "adapter_model.safetensors");
  RemoteFile config = RemoteEntry(url.value(), "adapter_config.json");
  EXPECT_EQ(config.url, "https://cdn.test/x/y/adapter_config.json");
  EXPECT_EQ(config.label, config.url);
}

TEST(RemoteAddress, MalformedAddressesAreRefusedBeforeAnyRequest) {
  for (std::string_view bad :
       {"hf://me", "hf://me/", "hf://me/m@", "hf://me/m/../x.safetensors", "hf://me/m//a.json"}) {
    auto parsed = ParseRemoteAddress(bad, kEndpoint);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument) << bad;
  }
  EXPECT_TRUE(IsRemoteArgument("HF://me/m"));
  EXPECT_TRUE(IsRemoteArgument("https://x/y"));
  EXPECT_FALSE(IsRemoteArgument("hf:/me/m"));
}

TEST(RemoteAddress, AFileAddressIsAFileWhateverItsName) {
  auto model = RemoteFileAddress("hf://me/m/tokenizer.model@refs/pr/1", kEndpoint);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->url, "http://hub.test:8080/me/m/resolve/refs%2Fpr%2F1/tokenizer.model");
  EXPECT_EQ(model->label, "hf://me/m/tokenizer.model@refs/pr/1");
  auto url = RemoteFileAddress("https://cdn.test/a b", kEndpoint);
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->url, "https://cdn.test/a b");
  auto repo = RemoteFileAddress("hf://me/m@v1", kEndpoint);
  ASSERT_FALSE(repo.ok());
  EXPECT_EQ(repo.error().message, "`hf://me/m@v1` names a repo, not a file: hf://owner/repo/path[@revision]");
  EXPECT_FALSE(RemoteFileAddress("hf://me/m/../x.safetensors", kEndpoint).ok());
}

// huggingface_hub's own form (HfFileSystem, parse_hf_uri): the revision right after owner/repo, then the path.
TEST(RemoteAddress, HuggingfaceHubsFormNamesWhatOursNames) {
  const std::pair<std::string_view, std::string_view> same[] = {
      {"hf://me/m@v1/sub/model.safetensors", "hf://me/m/sub/model.safetensors@v1"},
      {"hf://me/m@v1", "hf://me/m@v1"},
      {"hf://me/m@v1/", "hf://me/m@v1"},
      {"hf://me/m@v1/sub", "hf://me/m/sub@v1"},
      {"hf://me/m@refs/pr/3/model.safetensors", "hf://me/m/model.safetensors@refs/pr/3"},
      {"hf://me/m@refs/convert/parquet-v2/sub", "hf://me/m/sub@refs/convert/parquet-v2"},
      {"hf://me/m@feature%2Fx/model.safetensors", "hf://me/m/model.safetensors@feature/x"},
      {"hf://models/me/m@v1/model.safetensors", "hf://me/m/model.safetensors@v1"},
      {"hf://me/m@v1/file@2.safetensors", "hf://me/m/file@2.safetensors@v1"},
  };
  for (const auto& [theirs, ours] : same) {
    auto a = ParseRemoteAddress(theirs, kEndpoint), b = ParseRemoteAddress(ours, kEndpoint);
    ASSERT_TRUE(a.ok()) << theirs << ": " << a.error().message;
    ASSERT_TRUE(b.ok()) << ours << ": " << b.error().message;
    EXPECT_EQ(a->url, b->url) << theirs;
    EXPECT_EQ(a->folder, b->folder) << theirs;
    EXPECT_EQ(a->repo, b->repo) << theirs;
    EXPECT_EQ(a->revision, b->revision) << theirs;
    EXPECT_EQ(a->path, b->path) << theirs;
    EXPECT_EQ(a->label, std::string(theirs)) << "messages name the address as given";
  }
  auto revision = ParseRemoteAddress("hf://me/m@feature%2Fx/model.safetensors", kEndpoint);
  EXPECT_EQ(revision->url, "http://hub.test:8080/me/m/resolve/feature%2Fx/model.safetensors");
  // Our form decodes %2F alike: the branch is feature/x either way, requested as one segment.
  EXPECT_EQ(ParseRemoteAddress("hf://me/m/model.safetensors@feature%2Fx", kEndpoint)->revision, "feature/x");
  // Files beside it are named in the form the user wrote.
  auto folder = ParseRemoteAddress("hf://me/m@feature%2Fx/sub", kEndpoint);
  EXPECT_EQ(RemoteEntry(folder.value(), "a.safetensors").label, "hf://me/m@feature%2Fx/sub/a.safetensors");
  auto pr = ParseRemoteAddress("hf://me/m@refs/pr/3", kEndpoint);
  EXPECT_EQ(RemoteEntry(pr.value(), "a.safetensors").label, "hf://me/m@refs/pr/3/a.safetensors");
  EXPECT_EQ(RemoteFileAddress("hf://me/m@v1/x/tokenizer.model", kEndpoint)->url,
            "http://hub.test:8080/me/m/resolve/v1/x/tokenizer.model");
}

TEST(RemoteAddress, DatasetsSpacesKernelsAndBucketsAreRefusedByKind) {
  const std::pair<std::string_view, std::string_view> kinds[] = {{"hf://datasets/me/d@v1/train.safetensors", "dataset"},
                                                                 {"hf://spaces/me/s", "space"},
                                                                 {"hf://kernels/me/k", "kernel"},
                                                                 {"hf://buckets/me/b/x.safetensors", "bucket"}};
  for (const auto& [address, kind] : kinds) {
    auto parsed = ParseRemoteAddress(address, kEndpoint);
    ASSERT_FALSE(parsed.ok()) << address;
    EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(parsed.error().message,
              "`" + std::string(address) + "` names a Hub " + std::string(kind) +
                  ", not a model repo: peft-bridge reads model repos (hf://owner/repo[@revision][/path])");
    EXPECT_FALSE(RemoteFileAddress(address, kEndpoint).ok());
  }
  // an owner merely starting with a kind's name is an owner
  EXPECT_EQ(ParseRemoteAddress("hf://datasets-team/m", kEndpoint)->repo, "datasets-team/m");
  for (std::string_view bad : {"hf://me/m@/x.safetensors", "hf://models/me", "hf://datasets/me"})
    EXPECT_FALSE(ParseRemoteAddress(bad, kEndpoint).ok()) << bad;
}

TEST(RemoteBase, AFolderIsReadAsALocalModelFolder) {
  auto repo = ParseRemoteAddress("hf://me/m@v1", kEndpoint);
  ASSERT_TRUE(repo.ok());
  const std::vector<std::string> sharded = {"config.json", "model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                            "tokenizer.json"};
  auto files = ChooseRemoteBase(repo.value(), sharded);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->index, std::optional<std::string>("model.safetensors.index.json"));
  EXPECT_EQ(files->config, RemoteBaseFiles::Config::kListed);
  ASSERT_EQ(files->listing.size(), sharded.size());
  EXPECT_EQ(files->listing[4].name, "tokenizer.json");
  EXPECT_EQ(files->listing[4].kind, EntryKind::kFile);
  // The index wins over a single file, as in a local folder; no config.json listed: none is read.
  auto single = ChooseRemoteBase(repo.value(), std::vector<std::string>{"model.safetensors", "README.md"});
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single->index);
  EXPECT_EQ(single->single, "model.safetensors");
  EXPECT_EQ(single->config, RemoteBaseFiles::Config::kNone);
  auto none = ChooseRemoteBase(repo.value(), std::vector<std::string>{"README.md"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "`hf://me/m@v1` has neither model.safetensors nor model.safetensors.index.json");
}

TEST(RemoteBase, AFileAddressIsTheOneShardOrTheIndexWithAConfigTriedBesideIt) {
  const std::vector<std::string> unused = {"model.safetensors"};
  auto shard = ParseRemoteAddress("https://cdn.test/x/weights.safetensors?download=1", kEndpoint);
  ASSERT_TRUE(shard.ok());
  auto one = ChooseRemoteBase(shard.value(), unused);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->single, "weights.safetensors");
  EXPECT_EQ(one->config, RemoteBaseFiles::Config::kMaybe);
  EXPECT_TRUE(one->listing.empty());  // a file's neighbours are not the model's: nothing is copied
  auto index = ParseRemoteAddress("hf://me/m/unet/diffusion_pytorch_model.safetensors.index.json", kEndpoint);
  ASSERT_TRUE(index.ok());
  auto sharded = ChooseRemoteBase(index.value(), unused);
  ASSERT_TRUE(sharded.ok());
  EXPECT_EQ(sharded->index, std::optional<std::string>("diffusion_pytorch_model.safetensors.index.json"));
  auto config = ParseRemoteAddress("hf://me/m/config.json", kEndpoint);
  ASSERT_TRUE(config.ok());
  auto refused = ChooseRemoteBase(config.value(), unused);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
  EXPECT_EQ(refused.error().message,
            "`hf://me/m/config.json` is neither a .safetensors file nor a model index: a base is a model's folder, "
            "its index or its one .safetensors file");
}

TEST(RemoteAddress, HubListingGivesTheFolderFilesNamesOnly) {
  auto names =
      ParseHubListing(R"([{"type":"file","path":"sub/adapter_config.json"},{"type":"directory","path":"sub/x"},)"
                      R"({"type":"file","path":"sub/adapter_model.safetensors"}])",
                      "hf://me/a/sub");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names.value(), (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
  auto bad = ParseHubListing(R"({"error":"nope"})", "hf://me/a");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::IoError);
  EXPECT_EQ(bad.error().message, "the file list of `hf://me/a` is not a JSON array of entries");
}

TEST(BaseLayout, IndexFirstThenTheSingleFileElseAPreciseError) {
  std::vector<std::string> sharded{"config.json", "model.safetensors", "model.safetensors.index.json"};
  EXPECT_EQ(ChooseBaseFile("d", sharded).value(), "model.safetensors.index.json");
  std::vector<std::string> single{"config.json", "model.safetensors"};
  EXPECT_EQ(ChooseBaseFile("d", single).value(), "model.safetensors");
  std::vector<std::string> none{"config.json", "pytorch_model.bin"};
  auto missing = ChooseBaseFile("hf://me/m", none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "`hf://me/m` has neither model.safetensors nor model.safetensors.index.json");
  std::vector<std::string> adapter{"adapter_config.json", "adapter_model.safetensors", "README.md"};
  auto lora = ChooseBaseFile("hf://me/lora", adapter);
  ASSERT_FALSE(lora.ok());
  EXPECT_EQ(lora.error().message,
            "`hf://me/lora` has neither model.safetensors nor model.safetensors.index.json: it is an adapter "
            "(adapter_config.json); `peft-bridge adapter-info hf://me/lora` describes it");
  EXPECT_TRUE(IsModelIndexName("diffusion_pytorch_model.safetensors.index.json"));
  EXPECT_FALSE(IsModelIndexName("config.json"));
}

}  // namespace
}  // namespace pb::app

namespace pb {
namespace {

TEST(InspectFiles, EachReportUnderItsNameThenTheTotals) {
  InspectTotals a{1, 2, 100, 1000, 1100, {{Dtype::BF16, 400}, {Dtype::F32, 50}}};
  InspectTotals b{1, 1, 80, 2000, 2080, {{Dtype::BF16, 1000}}};
  std::vector<RenderedReport> files{{"a.safetensors", "A\n", a}, {"b.safetensors", "B\n", b}};
  EXPECT_EQ(RenderInspectFilesText(files), "==> a.safetensors <==\nA\n\n==> b.safetensors <==\nB\n\n"
                                           "==> total: 2 files <==\n"
                                           "header: 180 bytes, data: 3,000 bytes, files: 3,180 bytes\n"
                                           "tensors: 3\n"
                                           "parameters:\n  BF16: 1,400\n  F32: 50\n  total: 1,450\n");
  std::vector<RenderedReport> one{{"model.safetensors", "A\n", a}};
  EXPECT_EQ(RenderInspectFilesText(one), "==> model.safetensors <==\nA\n");  // one file: its report is the total
  std::vector<RenderedReport> json{{"a.safetensors", "{\"ok\":true,\"x\":1}\n", a}, {"b\"c", "{\"ok\":true}\n", b}};
  EXPECT_EQ(RenderInspectFilesJson(json),
            "{\"ok\":true,\"files\":[{\"path\":\"a.safetensors\",\"report\":{\"ok\":true,\"x\":1}},"
            "{\"path\":\"b\\\"c\",\"report\":{\"ok\":true}}],"
            "\"total\":{\"files\":2,\"tensors\":3,\"headerSize\":180,\"dataSize\":3000,\"fileSize\":3180,"
            "\"parameters\":{\"BF16\":1400,\"F32\":50},\"totalParameters\":1450}}\n");
}

// The npm CLI's edge counts from each file's JSON report; the natives from its header: the same numbers.
TEST(InspectFiles, TotalsFromTheJsonReportAreTheHeadersOwn) {
  std::string json =
      "{\"ok\":true,\"headerSize\":88,\"dataSize\":24,\"fileSize\":120,\"metadata\":{},"
      "\"tensors\":[{\"name\":\"a\"},{\"name\":\"b\"}],\"parameters\":{\"F32\":4,\"BF16\":4},\"totalParameters\":8}";
  auto t = TotalsOfReportJson(json);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tensors, 2u);
  EXPECT_EQ(t->header_size, 88u);
  EXPECT_EQ(t->data_size, 24u);
  EXPECT_EQ(t->file_size, 120u);
  EXPECT_EQ(t->parameters, (std::map<Dtype, uint64_t>{{Dtype::F32, 4}, {Dtype::BF16, 4}}));
  EXPECT_FALSE(TotalsOfReportJson("{\"ok\":true}").ok());
  EXPECT_FALSE(
      TotalsOfReportJson(
          "{\"ok\":true,\"headerSize\":1,\"dataSize\":1,\"fileSize\":1,\"tensors\":[],\"parameters\":{\"Q9\":1}}")
          .ok());
}

}  // namespace
}  // namespace pb
