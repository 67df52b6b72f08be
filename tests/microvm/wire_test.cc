// The host <-> guest codecs: round trips, and hostile or truncated input decoded without a crash
// and without trusting a single length.
#include "drivers/microvm/wire.h"

#include <gtest/gtest.h>

#include <string>

#include "drivers/microvm/guest_spec.h"

namespace safex::microvm {
namespace {

GuestSpec FullSpec() {
  GuestSpec s;
  s.argv = {"/bin/sh", "-c", "echo $HOME; 'x'", std::string("nul\0inside", 10)};
  s.env = {"PATH=/bin", "A=b c"};
  s.path_search = "/usr/bin:/bin";
  s.uid = 1000;
  s.gid = 1001;
  s.cwd = "/work";
  s.hostname = "sandbox";
  s.cpu_time_ns = 1;
  s.memory_bytes = 2;
  s.pids = 3;
  s.open_files = 4;
  s.output_bytes = 5;
  s.disk_bytes = 6;
  s.cpus = 7;
  GuestMount b;
  b.kind = GuestMountKind::kBind;
  b.target = "/usr";
  b.disk = 3;
  b.image_path = "/usr";
  GuestMount o;
  o.kind = GuestMountKind::kOutput;
  o.target = "/out";
  o.read_only = false;
  o.noexec = true;
  o.size_bytes = 1 << 20;
  s.mounts = {b, o};
  s.seccomp_default = GuestSyscallAction::kErrno;
  s.seccomp_default_errno = 38;
  s.seccomp_rules = {{"ptrace", GuestSyscallAction::kKill, 1},
                     {"mkdir", GuestSyscallAction::kErrno, 13}};
  s.max_output_files = 10;
  s.max_output_bytes = 100;
  s.etc_files = {{"passwd", "root:x:0:0::/:/sbin/nologin\n"}};
  s.has_stdin = true;
  s.network = GuestNetwork{"198.18.0.2", "198.18.0.1", 30};
  return s;
}

TEST(FrameReaderTest, ReassemblesFramesFedByteByByte) {
  std::string stream = EncodeFrame(FrameType::kStdout, "hello") +
                       EncodeFrame(FrameType::kStarted, "") +
                       EncodeFrame(FrameType::kStderr, std::string(70000, 'x').substr(0, 65536));
  FrameReader r(kMaxDataFrame);
  std::vector<Frame> got;
  for (char c : stream) {
    r.Feed(&c, 1);
    while (auto f = r.Next()) got.push_back(*f);
  }
  ASSERT_FALSE(r.failed());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].type, FrameType::kStdout);
  EXPECT_EQ(got[0].payload, "hello");
  EXPECT_EQ(got[1].type, FrameType::kStarted);
  EXPECT_EQ(got[1].payload, "");
  EXPECT_EQ(got[2].payload.size(), 65536u);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(FrameReaderTest, RefusesAnOversizedFrameBeforeReadingIt) {
  // A header announcing 4 GiB - 1: refused from the 8 header bytes alone, and it stays refused.
  std::string header("\x04\x00\x00\x00\xff\xff\xff\xff", 8);
  FrameReader r(kMaxDataFrame);
  r.Feed(header.data(), header.size());
  EXPECT_FALSE(r.Next().has_value());
  EXPECT_TRUE(r.failed());
  EXPECT_NE(r.error().find("announces 4294967295 bytes"), std::string::npos) << r.error();
  std::string good = EncodeFrame(FrameType::kStdout, "x");
  r.Feed(good.data(), good.size());
  EXPECT_FALSE(r.Next().has_value());
}

TEST(FrameReaderTest, ExactlyTheLimitIsAccepted) {
  FrameReader r(16);
  std::string ok = EncodeFrame(FrameType::kStdout, std::string(16, 'a'));
  r.Feed(ok.data(), ok.size());
  ASSERT_TRUE(r.Next().has_value());
  std::string over = EncodeFrame(FrameType::kStdout, std::string(17, 'a'));
  r.Feed(over.data(), over.size());
  EXPECT_FALSE(r.Next().has_value());
  EXPECT_TRUE(r.failed());
}

TEST(DecoderTest, ShortInputLatchesFailure) {
  Decoder d(std::string_view("\x01\x02", 2));
  uint32_t v = 0;
  EXPECT_FALSE(d.U32(&v));
  EXPECT_FALSE(d.ok());
  uint8_t b = 0;
  EXPECT_FALSE(d.U8(&b));  // still failed, even though a byte is there
}

TEST(DecoderTest, StringLengthsAreChecked) {
  Encoder e;
  e.Str(std::string(100, 'x'));
  Decoder small(e.bytes(), 99);
  std::string s;
  EXPECT_FALSE(small.Str(&s));
  Decoder fits(e.bytes(), 100);
  EXPECT_TRUE(fits.Str(&s));
  EXPECT_TRUE(fits.AtEnd());
  // A length beyond the input.
  std::string lying(
      "\xff\xff\xff\x00"
      "abc",
      7);
  Decoder d(lying);
  EXPECT_FALSE(d.Str(&s));
}

TEST(DecoderTest, AHugeListCountIsRefusedBeforeAllocating) {
  std::string input("\xff\xff\xff\x7f", 4);  // 2^31 - 1 items announced, none present
  Decoder d(input);
  std::vector<std::string> v;
  EXPECT_FALSE(d.StrList(&v, 1u << 31));
  EXPECT_TRUE(v.empty());
}

TEST(GuestSpecTest, RoundTripsEveryField) {
  GuestSpec s = FullSpec();
  std::optional<GuestSpec> d = DecodeSpec(EncodeSpec(s));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->argv, s.argv);
  EXPECT_EQ(d->env, s.env);
  EXPECT_EQ(d->path_search, s.path_search);
  EXPECT_EQ(d->uid, 1000u);
  EXPECT_EQ(d->gid, 1001u);
  EXPECT_EQ(d->cwd, "/work");
  EXPECT_EQ(d->hostname, "sandbox");
  EXPECT_EQ(d->cpu_time_ns, 1u);
  EXPECT_EQ(d->memory_bytes, 2u);
  EXPECT_EQ(d->pids, 3u);
  EXPECT_EQ(d->open_files, 4u);
  EXPECT_EQ(d->output_bytes, 5u);
  EXPECT_EQ(d->disk_bytes, 6u);
  EXPECT_EQ(d->cpus, 7u);
  ASSERT_EQ(d->mounts.size(), 2u);
  EXPECT_EQ(d->mounts[0].kind, GuestMountKind::kBind);
  EXPECT_EQ(d->mounts[0].disk, 3u);
  EXPECT_EQ(d->mounts[0].image_path, "/usr");
  EXPECT_TRUE(d->mounts[0].read_only);
  EXPECT_EQ(d->mounts[1].kind, GuestMountKind::kOutput);
  EXPECT_FALSE(d->mounts[1].read_only);
  EXPECT_TRUE(d->mounts[1].noexec);
  EXPECT_EQ(d->mounts[1].size_bytes, 1u << 20);
  EXPECT_EQ(d->seccomp_default, GuestSyscallAction::kErrno);
  EXPECT_EQ(d->seccomp_default_errno, 38);
  ASSERT_EQ(d->seccomp_rules.size(), 2u);
  EXPECT_EQ(d->seccomp_rules[1].name, "mkdir");
  EXPECT_EQ(d->seccomp_rules[1].errno_value, 13);
  EXPECT_EQ(d->max_output_files, 10u);
  EXPECT_EQ(d->max_output_bytes, 100u);
  EXPECT_EQ(d->etc_files, s.etc_files);
  EXPECT_TRUE(d->has_stdin);
  ASSERT_TRUE(d->network.has_value());
  EXPECT_EQ(d->network->address, "198.18.0.2");
  EXPECT_EQ(d->network->prefix, 30u);
}

TEST(GuestSpecTest, EveryTruncationIsRefused) {
  std::string enc = EncodeSpec(FullSpec());
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeSpec(std::string_view(enc).substr(0, n)).has_value()) << "prefix " << n;
  }
  EXPECT_FALSE(DecodeSpec(enc + "x").has_value());  // trailing bytes
}

TEST(GuestSpecTest, SingleByteCorruptionNeverCrashes) {
  std::string enc = EncodeSpec(FullSpec());
  for (size_t i = 0; i < enc.size(); ++i) {
    for (unsigned char v : {0x00, 0x02, 0x7f, 0xff}) {
      std::string bad = enc;
      bad[i] = static_cast<char>(v);
      (void)DecodeSpec(bad);  // accepted or not; must not crash or allocate wildly
    }
  }
}

TEST(GuestSpecTest, OutOfRangeEnumsAndBooleansAreRefused) {
  GuestSpec s = FullSpec();
  s.network.reset();
  s.etc_files.clear();
  s.seccomp_rules.clear();
  std::string enc = EncodeSpec(s);
  // The last three bytes are has_stdin, has_network and request_later: 2 is not a boolean.
  for (size_t back : {1, 2, 3}) {
    std::string bad = enc;
    bad[bad.size() - back] = 2;
    EXPECT_FALSE(DecodeSpec(bad).has_value()) << back;
  }
}

// A pooled VM's spec goes before its request: no program and no stdin in it, which the decoder
// holds it to; the request brings both, and is as strict as the spec.
TEST(GuestSpecTest, ASpecAheadOfItsRequestHasNoProgram) {
  GuestSpec s = FullSpec();
  s.argv.clear();
  s.has_stdin = false;
  s.request_later = true;
  std::optional<GuestSpec> d = DecodeSpec(EncodeSpec(s));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->request_later);
  EXPECT_TRUE(d->argv.empty());
  EXPECT_EQ(d->mounts.size(), 2u);
  s.argv = {"/bin/sh"};  // a program in a spec ahead of its request
  EXPECT_FALSE(DecodeSpec(EncodeSpec(s)).has_value());
  s.argv.clear();
  s.has_stdin = true;
  EXPECT_FALSE(DecodeSpec(EncodeSpec(s)).has_value());
}

TEST(GuestRequestTest, RoundTripsAndIsStrict) {
  GuestRequest r{{"python3", "-c", "print(1)"}, true};
  std::optional<GuestRequest> d = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->argv, r.argv);
  EXPECT_TRUE(d->has_stdin);
  const std::string enc = EncodeRequest(r);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeRequest(std::string_view(enc).substr(0, n)).has_value()) << "prefix " << n;
  }
  EXPECT_FALSE(DecodeRequest(enc + "x").has_value());
  EXPECT_FALSE(DecodeRequest(EncodeRequest({{}, false})).has_value()) << "no program";
  EXPECT_FALSE(DecodeRequest(EncodeSpec(FullSpec())).has_value()) << "a spec is not a request";
  std::string bad = enc;
  bad.back() = 2;  // has_stdin
  EXPECT_FALSE(DecodeRequest(bad).has_value());
}

TEST(ExitReportTest, RoundTripAndBadLimit) {
  ExitReport e;
  e.exit_code = 3;
  e.term_signal = 0;
  e.limit = GuestLimit::kPids;
  e.cpu_ns = 123;
  e.peak_memory_bytes = 456;
  e.oom_kills = 1;
  e.fork_failures = 9;
  e.stdout_total = 10;
  e.stderr_total = 11;
  e.detail = "fork failed";
  auto d = DecodeExit(EncodeExit(e));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->exit_code, 3);
  EXPECT_EQ(d->limit, GuestLimit::kPids);
  EXPECT_EQ(d->fork_failures, 9u);
  EXPECT_EQ(d->detail, "fork failed");
  std::string bad = EncodeExit(e);
  bad[8] = 99;  // the limit field
  EXPECT_FALSE(DecodeExit(bad).has_value());
}

TEST(FileHeaderTest, RoundTripAndUnknownKind) {
  FileHeader h;
  h.mount_index = 2;
  h.kind = FileKind::kSymlink;
  h.mode = 0777;
  h.size = 0;
  h.path = "a/b";
  h.link_target = "/etc/shadow";
  auto d = DecodeFileHeader(EncodeFileHeader(h));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, FileKind::kSymlink);
  EXPECT_EQ(d->link_target, "/etc/shadow");
  std::string bad = EncodeFileHeader(h);
  bad[4] = 0;  // kind 0 does not exist
  EXPECT_FALSE(DecodeFileHeader(bad).has_value());
  bad[4] = 5;
  EXPECT_FALSE(DecodeFileHeader(bad).has_value());
}

TEST(HelloTest, RoundTrip) {
  Hello h{kProtocolVersion, "6.1.0-57-cloud-amd64", 1500000000, 20000000};
  auto d = DecodeHello(EncodeHello(h));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->protocol_version, kProtocolVersion);
  EXPECT_EQ(d->kernel_release, "6.1.0-57-cloud-amd64");
  EXPECT_EQ(d->agent_start_ns, 1500000000u);
  EXPECT_EQ(d->modules_ns, 20000000u);
}

TEST(HeartbeatTest, RoundTrip) {
  Heartbeat h{4'200'000'000ull, 1'500'000'000ull, false, "S do_wait"};
  auto d = DecodeHeartbeat(EncodeHeartbeat(h));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->guest_ns, 4'200'000'000ull);
  EXPECT_EQ(d->cpu_ns, 1'500'000'000ull);
  EXPECT_FALSE(d->program_exited);
  EXPECT_EQ(d->program_state, "S do_wait");
  h.program_exited = true;
  EXPECT_TRUE(DecodeHeartbeat(EncodeHeartbeat(h))->program_exited);
}

// From a guest that may be hostile: a flag that is neither 0 nor 1, trailing bytes, a state longer
// than the limit, a short payload: all refused.
TEST(HeartbeatTest, MalformedHeartbeatsAreRefused) {
  std::string good = EncodeHeartbeat({1, 2, false, "R"});
  std::string flag = good;
  flag[16] = 2;
  EXPECT_FALSE(DecodeHeartbeat(flag).has_value());
  EXPECT_FALSE(DecodeHeartbeat(good + "x").has_value());
  EXPECT_FALSE(DecodeHeartbeat(good.substr(0, good.size() - 1)).has_value());
  Encoder e;
  e.U64(1);
  e.U64(2);
  e.U8(0);
  e.Str(std::string(kMaxHeartbeatState + 1, 'a'));
  EXPECT_FALSE(DecodeHeartbeat(e.bytes()).has_value());
  // The encoder never sends more than the limit.
  Heartbeat big{1, 2, false, std::string(4 * kMaxHeartbeatState, 'a')};
  EXPECT_EQ(DecodeHeartbeat(EncodeHeartbeat(big))->program_state.size(), kMaxHeartbeatState);
}

}  // namespace
}  // namespace safex::microvm
