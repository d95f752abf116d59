// The pod watch's per-event cost on the pods the perf harness streams (the sim's realistic
// workloads, 5.6-6.1 KB each): decoding a watch line, and turning the pod into the ledger's record;
// and the same pods as frames of a protobuf watch (kubernetes.contentType's default), as
// fitledger-sim encodes them.
// The initial sync of 150,000 such pods spends most of its server CPU here (docs/performance.md).
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/kube/objects.h"
#include "server/kube/watcher.h"
#include "sim/protobuf.h"
#include "sim/realistic.h"
#include "simdjson.h"

namespace fitledger {
namespace {

// One ADDED line per workload shape, filled in as the sim's store fills a pod.
std::vector<std::string> RealisticPodEvents() {
  std::vector<std::string> lines;
  for (int shape = 0; shape < sim::kRealisticPodShapes; ++shape) {
    const sim::PodTemplate t =
        sim::RealisticPodTemplate(shape, {{"cpu", "250m"}, {"memory", "256Mi"}}, 7 + shape);
    std::vector<std::string> container_ids;
    for (int k = 0; k < t.containers; ++k) container_ids.emplace_back(64, 'a' + k);
    const std::string pod = sim::FillPodTemplate(
        t.json, absl::StrCat(t.generate_name, "x2k4q"), "shop",
        "5f0c1a52-3b7e-4c49-9a43-0d1f5e6b7a88", 918273, "gke-prod-eu1-default-pool-3f9a1c2e-x7q2",
        "10.4.17.9", "10.96.41.7", "2026-11-30T10:00:00Z", container_ids);
    lines.push_back(absl::StrCat(R"({"type":"ADDED","object":)", pod, "}"));
  }
  return lines;
}

// Decodes `line`; on an error, marks the benchmark failed and returns nullopt.
std::optional<kube::WatchEvent> Decode(benchmark::State& state, const std::string& line) {
  absl::StatusOr<kube::WatchEvent> event =
      kube::DecodeWatchEvent(kube::ObjectKind::kPod, line, nullptr);
  if (event.ok()) return *std::move(event);
  state.SkipWithError(std::string(event.status().message()).c_str());
  return std::nullopt;
}

void BM_DecodeWatchEventRealisticPod(benchmark::State& state) {
  const std::vector<std::string> lines = RealisticPodEvents();
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& line = lines[i++ % lines.size()];
    std::optional<kube::WatchEvent> event = Decode(state, line);
    if (!event.has_value()) return;
    benchmark::DoNotOptimize(event);
    bytes += line.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_DecodeWatchEventRealisticPod);

// The same lines decoded in place, as the watcher decodes ApiClient::Stream's lines (each followed
// by kStreamLinePadding readable bytes): DecodePaddedWatchEvent, without the copy of the line.
void BM_DecodePaddedWatchEventRealisticPod(benchmark::State& state) {
  std::vector<std::string> buffers;  // each line, then the padding
  for (const std::string& line : RealisticPodEvents()) {
    buffers.push_back(line + std::string(kube::kWatchLinePadding, ' '));
  }
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& buffer = buffers[i++ % buffers.size()];
    const size_t size = buffer.size() - kube::kWatchLinePadding;
    absl::StatusOr<kube::WatchEvent> event = kube::DecodePaddedWatchEvent(
        kube::ObjectKind::kPod, absl::string_view(buffer.data(), size), nullptr);
    if (!event.ok()) {
      state.SkipWithError(std::string(event.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(event);
    bytes += size;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_DecodePaddedWatchEventRealisticPod);

void BM_ToPodRecordRealisticPod(benchmark::State& state) {
  std::vector<Pod> pods;
  for (const std::string& line : RealisticPodEvents()) {
    std::optional<kube::WatchEvent> event = Decode(state, line);
    if (!event.has_value()) return;
    pods.push_back(*event->pod);
  }
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<PodRecord> record = kube::ToPodRecord(pods[i++ % pods.size()]);
    benchmark::DoNotOptimize(record);
  }
}
BENCHMARK(BM_ToPodRecordRealisticPod);

// A floor for the decoder, on the same lines: simdjson indexes the line (stage 1, every byte) and
// steps over the event's fields, skipping the whole object; nothing is read out of it. Decoding
// the pod cannot cost less than this with simdjson's on-demand API.
void BM_SimdjsonIndexAndSkipFloor(benchmark::State& state) {
  std::vector<simdjson::padded_string> lines;
  for (const std::string& line : RealisticPodEvents()) lines.emplace_back(line);
  simdjson::ondemand::parser parser;
  size_t i = 0, bytes = 0, fields = 0;
  for (auto _ : state) {
    const simdjson::padded_string& line = lines[i++ % lines.size()];
    simdjson::ondemand::document doc;
    simdjson::ondemand::object event;
    if (parser.iterate(line).get(doc) || doc.get_object().get(event)) {
      state.SkipWithError("not a JSON object");
      return;
    }
    for (auto field : event) {
      simdjson::ondemand::value v;
      if (field.value().get(v)) {
        state.SkipWithError("undecodable field");
        return;
      }
      ++fields;
    }
    bytes += line.size();
  }
  benchmark::DoNotOptimize(fields);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_SimdjsonIndexAndSkipFloor);

// What a sync does with each pod of the state: decode the line, then move the pod into its record.
void BM_DecodeAndRecordRealisticPod(benchmark::State& state) {
  const std::vector<std::string> lines = RealisticPodEvents();
  size_t i = 0;
  for (auto _ : state) {
    std::optional<kube::WatchEvent> event = Decode(state, lines[i++ % lines.size()]);
    if (!event.has_value()) return;
    absl::StatusOr<PodRecord> record = kube::ToPodRecord(*std::move(event->pod));
    benchmark::DoNotOptimize(record);
  }
}
BENCHMARK(BM_DecodeAndRecordRealisticPod);

// The same pods as frames of a protobuf watch stream (the frame's bytes, without the 4-byte
// length the API client strips): DecodeProtobufWatchEvent.
std::vector<std::string> RealisticPodFrames(benchmark::State& state) {
  std::vector<std::string> frames;
  for (const std::string& line : RealisticPodEvents()) {
    // The object of `{"type":"ADDED","object":...}`.
    const std::string object = line.substr(25, line.size() - 26);
    absl::StatusOr<std::string> envelope = sim::ProtobufEnvelopeFromText(object);
    if (!envelope.ok()) {
      state.SkipWithError(std::string(envelope.status().message()).c_str());
      return {};
    }
    std::string frame;
    sim::AppendWatchFrame("ADDED", *envelope, &frame);
    frames.push_back(frame.substr(4));
  }
  return frames;
}

void BM_DecodeProtobufWatchEventRealisticPod(benchmark::State& state) {
  const std::vector<std::string> frames = RealisticPodFrames(state);
  if (frames.empty()) return;
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& frame = frames[i++ % frames.size()];
    absl::StatusOr<kube::WatchEvent> event =
        kube::DecodeProtobufWatchEvent(kube::ObjectKind::kPod, frame, nullptr);
    if (!event.ok()) {
      state.SkipWithError(std::string(event.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(event);
    bytes += frame.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_DecodeProtobufWatchEventRealisticPod);

// What a sync does with each pod of a protobuf state (compare BM_DecodeAndRecordRealisticPod).
void BM_DecodeProtobufAndRecordRealisticPod(benchmark::State& state) {
  const std::vector<std::string> frames = RealisticPodFrames(state);
  if (frames.empty()) return;
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<kube::WatchEvent> event = kube::DecodeProtobufWatchEvent(
        kube::ObjectKind::kPod, frames[i++ % frames.size()], nullptr);
    if (!event.ok() || !event->pod.has_value()) {
      state.SkipWithError("undecodable frame");
      return;
    }
    absl::StatusOr<PodRecord> record = kube::ToPodRecord(*std::move(event->pod));
    benchmark::DoNotOptimize(record);
  }
}
BENCHMARK(BM_DecodeProtobufAndRecordRealisticPod);

}  // namespace
}  // namespace fitledger

BENCHMARK_MAIN();
