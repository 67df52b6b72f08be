// The framing of the host <-> guest channel (one virtio-serial port) and the byte codec used by
// every message on it. Shared by the host driver and the guest agent (guest/), so it depends on
// the C++ standard library only (the agent is a static binary with no project libraries).
//
// A frame is an 8-byte header, {u32 type, u32 length} little-endian, then `length` payload bytes.
// Neither side trusts the other's lengths: the reader refuses a frame longer than the limit its
// owner sets before reading the payload, and every payload is decoded with bounds checks.
// After the workload has started, the guest must be assumed compromised: the host side parses
// with small limits and a state machine (microvm_driver.cc) and kills the VM on any violation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace safex::microvm {

// Bumped whenever a message changes shape; the agent reports its version in kHello and the host
// refuses a mismatch (an initramfs built from other sources).
// 3: kEvidence and kGo; 4: kHeartbeat, kNudge; 5: kSetUp and kRequest (a pooled VM set up ahead)
inline constexpr uint32_t kProtocolVersion = 5;

// The virtio-serial port name the host creates and the guest looks for.
inline constexpr const char* kPortName = "safex.0";

enum class FrameType : uint32_t {
  // guest -> host
  kHello = 1,         // u32 protocol version, str kernel release
  kSetupError = 2,    // str message: the guest could not prepare the run; nothing ran
  kStarted = 3,       // empty: the program was exec'd
  kStdout = 4,        // bytes
  kStderr = 5,        // bytes
  kExit = 6,          // ExitReport
  kFileBegin = 7,     // FileHeader
  kFileData = 8,      // bytes of the current regular file
  kFileEnd = 9,       // empty
  kOutputsDone = 10,  // u64 entries skipped (special files, over the caps)
  kEvidence = 11,     // the workload's sandbox report just before its exec (sandbox_report.h)
  kHeartbeat = 12,    // Heartbeat (guest_spec.h): the agent's view, about once a second of a run
  kSetUp = 13,        // empty: a spec with request_later is set up; the agent waits for kRequest
  // host -> guest
  kSpec = 100,       // GuestSpec (guest_spec.h)
  kStdinData = 101,  // bytes
  kStdinEnd = 102,   // empty
  kGo = 103,         // empty: the evidence holds, the program may start (else the VM is killed)
  kNudge = 104,      // empty: the host has heard nothing for a while (vm_session.h); ignored
  kRequest = 105,    // GuestRequest (guest_spec.h): argv and stdin of a pooled VM's run
};

inline constexpr size_t kFrameHeaderSize = 8;
// Largest data frame either side sends (stdout/stderr/file/stdin chunks).
inline constexpr size_t kMaxDataFrame = 64 * 1024;
// Largest kSpec frame the host sends (argv, env, mounts, seccomp rules).
inline constexpr size_t kMaxSpecFrame = 1024 * 1024;
// Largest control frame (hello, errors, exit report, file header).
inline constexpr size_t kMaxControlFrame = 16 * 1024;

struct Frame {
  FrameType type;
  std::string payload;
};

// Appends a frame (header + payload) to `out`. REQUIRES: payload.size() fits in u32.
void AppendFrame(FrameType type, std::string_view payload, std::string* out);
std::string EncodeFrame(FrameType type, std::string_view payload);

// Incremental frame parser for a byte stream. Feed() arbitrary chunks; Next() yields complete
// frames. A header announcing more than `max_payload` bytes is an error (and stays one: the
// stream cannot be resynchronised). The buffer never holds more than one frame plus one chunk.
class FrameReader {
 public:
  explicit FrameReader(size_t max_payload) : max_payload_(max_payload) {}

  void Feed(const char* data, size_t n) { buf_.append(data, n); }
  // nullopt when no complete frame is buffered or after an error (see error()).
  std::optional<Frame> Next();
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // Bytes buffered but not yet returned as frames.
  size_t pending() const { return buf_.size() - pos_; }

 private:
  size_t max_payload_;
  std::string buf_;
  size_t pos_ = 0;
  std::string error_;
};

// Little-endian encoder for payloads.
class Encoder {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v);
  void U64(uint64_t v);
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void Str(std::string_view s);  // u32 length + bytes
  void StrList(const std::vector<std::string>& v);
  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Bounds-checked decoder. Every getter returns false (and latches ok() == false) when the input
// is short or a string exceeds `max_string`; callers check ok() once at the end, or per field.
class Decoder {
 public:
  explicit Decoder(std::string_view in, size_t max_string = 1024 * 1024)
      : in_(in), max_string_(max_string) {}
  bool U8(uint8_t* v);
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool I32(int32_t* v);
  bool Str(std::string* s);
  // A list of at most `max_items` strings.
  bool StrList(std::vector<std::string>* v, size_t max_items);
  bool ok() const { return ok_; }
  bool AtEnd() const { return ok_ && pos_ == in_.size(); }
  // Marks the input malformed (e.g. a value out of range).
  void Fail() { ok_ = false; }

 private:
  bool Need(size_t n);
  std::string_view in_;
  size_t max_string_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace safex::microvm
