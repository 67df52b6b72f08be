// Shared by every containment probe: one machine-readable result line on stdout.
//
// A probe is a small static program that tries ONE attack of docs/containment.md for real and
// reports what it saw as a single JSON object on one line:
//   {"case":"F1","attempted":"open host secrets","result":"ENOENT","escaped":false,"obs":{...}}
// - case:      the catalogue id
// - attempted: what was tried, in a few words
// - result:    the short observation shown in docs/containment.md (an errno name, a count, ...)
// - escaped:   the probe's own judgement: true when the attack worked (it reached something the
//              sandbox should have kept from it). The runner does not trust it alone: it checks
//              the fields in `obs`, the verdict, the audit log and the host.
// - obs:       the details (errno names per target, counts, paths, ...)
// Probes that expect to be killed (memory bomb, deadline, SIGSTOP) print a line with
// "result":"started" before the attack and a second one only if they survive; the runner reads
// the last line.
//
// Exit status: 0 contained (as far as the probe can tell), 1 escaped, 2 usage or setup error.
// Output is ASCII only (JSON-escaped), so that the example policies' stdout validators
// (utf8 = true, control = reject) accept it.
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // also set on the command line (CMake): system headers come first
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kProbeContained = 0, kProbeEscaped = 1, kProbeError = 2 };

typedef struct {
  char buf[60000];
  size_t len;
  int obs_items;
  int escaped;
} Probe;

static inline void probe_raw(Probe* p, const char* s) {
  size_t n = strlen(s);
  if (p->len + n >= sizeof p->buf - 64) return;  // bounded: the tail is dropped, the line closes
  memcpy(p->buf + p->len, s, n);
  p->len += n;
}

static inline void probe_quoted(Probe* p, const char* s, size_t n) {
  probe_raw(p, "\"");
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      esc[2] = 0;
    } else if (c < 0x20 || c >= 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
    } else {
      esc[0] = (char)c;
      esc[1] = 0;
    }
    probe_raw(p, esc);
  }
  probe_raw(p, "\"");
}

static inline const char* probe_errname(int err) {
  if (err == 0) return "OK";
  const char* n = strerrorname_np(err);
  return n != NULL ? n : "E?";
}

// Starts the line: case id and what is attempted.
static inline void probe_begin(Probe* p, const char* case_id, const char* attempted) {
  p->len = 0;
  p->obs_items = 0;
  p->escaped = 0;
  probe_raw(p, "{\"case\":");
  probe_quoted(p, case_id, strlen(case_id));
  probe_raw(p, ",\"attempted\":");
  probe_quoted(p, attempted, strlen(attempted));
  probe_raw(p, ",\"obs\":{");
}

static inline void probe_key(Probe* p, const char* key) {
  if (p->obs_items++ > 0) probe_raw(p, ",");
  probe_quoted(p, key, strlen(key));
  probe_raw(p, ":");
}

static inline void probe_str(Probe* p, const char* key, const char* value) {
  probe_key(p, key);
  probe_quoted(p, value, strlen(value));
}

static inline void probe_strn(Probe* p, const char* key, const char* value, size_t n) {
  probe_key(p, key);
  probe_quoted(p, value, n);
}

static inline void probe_int(Probe* p, const char* key, long long value) {
  char num[32];
  snprintf(num, sizeof num, "%lld", value);
  probe_key(p, key);
  probe_raw(p, num);
}

static inline void probe_bool(Probe* p, const char* key, int value) {
  probe_key(p, key);
  probe_raw(p, value ? "true" : "false");
}

// The outcome of one call: "OK" or its errno name.
static inline void probe_err(Probe* p, const char* key, int err) {
  probe_str(p, key, probe_errname(err));
}

static inline void probe_fmt(Probe* p, const char* key, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void probe_fmt(Probe* p, const char* key, const char* fmt, ...) {
  char tmp[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  probe_str(p, key, tmp);
}

// Marks the attack as having worked (the probe reached what it should not have).
static inline void probe_escaped(Probe* p) { p->escaped = 1; }

static inline void probe_write_all(const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

// Closes the line with `result` and prints it in one write. Returns the exit status.
static inline int probe_finish(Probe* p, const char* result) {
  probe_raw(p, "},\"result\":");
  probe_quoted(p, result, strlen(result));
  probe_raw(p, p->escaped ? ",\"escaped\":true}\n" : ",\"escaped\":false}\n");
  probe_write_all(p->buf, p->len);
  return p->escaped ? kProbeEscaped : kProbeContained;
}

// For probes that may be killed mid-attack: prints {"case":..,"result":"started"} now.
static inline void probe_started(const char* case_id, const char* attempted) {
  Probe p;
  probe_begin(&p, case_id, attempted);
  probe_finish(&p, "started");
}

// Appends `name` to a comma-separated summary (bounded).
static inline void probe_list_add(char* list, size_t cap, const char* name) {
  size_t n = strlen(list);
  if (n + strlen(name) + 2 >= cap) return;
  if (n > 0) strcat(list, ",");
  strcat(list, name);
}

// Adds errno name `e` to a summary of distinct errno names ("ENOENT,EACCES").
static inline void probe_errset_add(char* set, size_t cap, int e) {
  const char* name = probe_errname(e);
  char padded[64];
  snprintf(padded, sizeof padded, ",%s,", name);
  char scan[1024];
  snprintf(scan, sizeof scan, ",%s,", set);
  if (strstr(scan, padded) != NULL) return;
  probe_list_add(set, cap, name);
}
