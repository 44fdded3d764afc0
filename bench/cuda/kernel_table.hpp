// Where a step's GPU time goes, kernel by kernel: the host half of bench_trainer's kernel trace.
// kernel_trace.hpp collects what the GPU ran through CUPTI and hands each execution to a
// kernel_table; the table sums them per kernel, keeps them in the GPU's order and writes kernels.csv
// and timeline.csv. Pure host code, so that it is tested on machines without a GPU (test_kernel_table).
#pragma once

#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace fp8_bench {

// A kernel's name as a table shows it: demangled where the compiler mangled it, without the return
// type and the parameter list. The template arguments stay: they tell a kernel's variants apart (the
// quantize kernels per element type and scaling, say). Names nobody mangled (cuBLASLt's and cuDNN's
// kernels are extern "C") come back as they are.
inline std::string readable_kernel_name(const std::string& name) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  std::string text = status == 0 && demangled ? std::string(demangled.get()) : name;
  // The parameter list is the parenthesis that ends the name and the one that opens it; template
  // arguments before it may hold parentheses of their own (a cast such as "(fp8::rounding)0").
  if (!text.empty() && text.back() == ')') {
    int depth = 0;
    for (std::size_t i = text.size(); i-- > 0;) {
      if (text[i] == ')') {
        ++depth;
      } else if (text[i] == '(' && --depth == 0) {
        text.erase(i);
        break;
      }
    }
  }
  const std::string return_type = "void ";  // a kernel's: only function templates spell it
  if (text.compare(0, return_type.size(), return_type) == 0) text.erase(0, return_type.size());
  return text;
}

// One execution of a kernel (or copy, or memset): nanoseconds of the GPU's clock.
struct kernel_execution {
  std::string name;
  std::uint64_t start = 0, end = 0;
};

// One kernel's (or copy's, or memset's) executions over the traced steps.
struct kernel_time {
  std::string name;
  std::int64_t calls = 0;
  double nanoseconds = 0.0;
};

class kernel_table {
 public:
  // One execution from start to end (nanoseconds, one clock for all). A record without times (both
  // 0: CUPTI says so when it lacked device memory for its timestamps) is only counted (untimed()): in
  // the timeline it would move the origin to 0, and as a call of no time skew the counts. One whose
  // end came before its start counts as a call of no time, not as a negative one.
  void add(const std::string& name, std::uint64_t start, std::uint64_t end) {
    if (start == 0 && end == 0) {
      ++untimed_;
      return;
    }
    executions_.push_back({name, start, end < start ? start : end});
  }

  // Records add() was given without times: the table undercounts by as many.
  std::int64_t untimed() const { return untimed_; }

  // Every execution in the order the GPU started them (records arrive in no particular order).
  std::vector<kernel_execution> timeline() const {
    std::vector<kernel_execution> ordered = executions_;
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const kernel_execution& a, const kernel_execution& b) { return a.start < b.start; });
    return ordered;
  }

  // The kernels by their summed time, the longest first (equal times by name, so that the order
  // does not depend on the order of the records).
  std::vector<kernel_time> by_time() const {
    std::map<std::string, kernel_time> kernels;  // by name: each name's row once, in name order
    for (const kernel_execution& e : executions_) {
      kernel_time& k = kernels[e.name];
      k.name = e.name;
      ++k.calls;
      k.nanoseconds += double(e.end - e.start);
    }
    std::vector<kernel_time> rows;
    for (const auto& entry : kernels) rows.push_back(entry.second);
    std::stable_sort(rows.begin(), rows.end(), [](const kernel_time& a, const kernel_time& b) {
      return a.nanoseconds > b.nanoseconds;
    });
    return rows;
  }

  std::int64_t calls() const { return std::int64_t(executions_.size()); }

  double summed_nanoseconds() const {
    double total = 0.0;
    for (const kernel_execution& e : executions_) total += double(e.end - e.start);
    return total;
  }

  // Nanoseconds in which something ran: the union of the executions. Kernels on different streams
  // may overlap (cuDNN and cuBLASLt may use their own), so their summed time can exceed it; the step's
  // time less this is time in which the GPU waited (for the host's launches, a copy to the host).
  double busy_nanoseconds() const {
    double busy = 0.0;
    std::uint64_t covered_to = 0;
    for (const kernel_execution& e : timeline()) {
      const std::uint64_t from = std::max(e.start, covered_to);
      if (e.end > from) {
        busy += double(e.end - from);
        covered_to = e.end;
      }
    }
    return busy;
  }

 private:
  std::vector<kernel_execution> executions_;  // in the order they were added
  std::int64_t untimed_ = 0;
};

// A field of a CSV line: quoted, since kernel names hold commas ("quantize<float, 128>"), with any
// quote doubled.
inline std::string csv_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// kernels.csv's lines (no header) for one traced run: label (the precision), the kernel, its calls
// and milliseconds per step over `steps` traced steps, the longest first.
inline std::string kernel_csv_lines(const std::string& label, const kernel_table& table, int steps) {
  std::ostringstream lines;
  for (const kernel_time& k : table.by_time()) {
    lines << label << "," << csv_quoted(k.name) << "," << double(k.calls) / steps << ","
          << k.nanoseconds / 1e6 / steps << "\n";
  }
  return lines.str();
}

// timeline.csv's lines (no header) for one traced run: label, the start in microseconds after the
// first execution's, the duration in microseconds, the name; in the order the GPU started them. On
// one stream that is the order of the launches, so that a reader who knows the model's order of
// calls can say which layer each GEMM ran for (the names alone do not: shapes share kernels).
inline std::string timeline_csv_lines(const std::string& label, const kernel_table& table) {
  std::ostringstream lines;
  lines << std::fixed << std::setprecision(3);  // microseconds to the nanosecond
  const std::vector<kernel_execution> ordered = table.timeline();
  const std::uint64_t origin = ordered.empty() ? 0 : ordered.front().start;
  for (const kernel_execution& e : ordered) {
    lines << label << "," << double(e.start - origin) / 1e3 << "," << double(e.end - e.start) / 1e3 << ","
          << csv_quoted(e.name) << "\n";
  }
  return lines.str();
}

}  // namespace fp8_bench
