// ocular._ocular: the public C++ API (include/ocular/) for Python, through nanobind. Thin on
// purpose: the package (python/ocular/) turns Python inputs (paths, bytes, PIL images, numpy
// arrays, OpenAI messages) into the plain values taken here and the plain values returned here
// into its result classes. What this layer owns: the GIL (released while the engine works),
// Ctrl-C (a signal seen between decoded pieces cancels the request), several requests at once
// (generate_batch: one thread each, so the engine batches them), and errors (a Status becomes
// ocular.errors.OcularError with its code and message).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ocular/detection.h"
#include "ocular/engine.h"
#include "ocular/status.h"
#include "ocular/tasks.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A non-OK Status on its way to Python (translated to ocular.errors.OcularError).
struct StatusError {
  ocular::Status status;
};

template <typename T>
T ValueOrRaise(ocular::StatusOr<T> v) {
  if (!v.ok()) throw StatusError{v.status()};
  return std::move(v).value();
}

// Python image values as the package passes them: str (a path) or bytes (an encoded file;
// PIL images and numpy arrays arrive as BMP). Copied: the engine runs without the GIL.
ocular::ImageInput ToImage(nb::handle h) {
  if (nb::isinstance<nb::str>(h)) return ocular::ImageInput(nb::cast<std::string>(h));
  if (nb::isinstance<nb::bytes>(h)) {
    nb::bytes b = nb::borrow<nb::bytes>(h);
    const auto* p = static_cast<const uint8_t*>(b.data());
    return ocular::ImageInput::FromBytes(std::vector<uint8_t>(p, p + b.size()));
  }
  throw nb::type_error("image: expected str (a path) or bytes (an encoded image)");
}

std::vector<ocular::ImageInput> ToImages(nb::handle list) {
  std::vector<ocular::ImageInput> images;
  for (nb::handle h : list) images.push_back(ToImage(h));
  return images;
}

// The keys the package sends (python/ocular/_model.py); any other key is a bug there.
ocular::GenerateOptions ToOptions(nb::dict d) {
  ocular::GenerateOptions o;
  for (auto [k, v] : d) {
    const std::string key = nb::cast<std::string>(k);
    if (key == "max_tokens") {
      o.max_tokens = nb::cast<int>(v);
    } else if (key == "temperature") {
      o.temperature = nb::cast<float>(v);
    } else if (key == "top_k") {
      o.top_k = nb::cast<int>(v);
    } else if (key == "top_p") {
      o.top_p = nb::cast<float>(v);
    } else if (key == "seed") {
      o.seed = nb::cast<uint64_t>(v);
    } else if (key == "stop") {
      o.stop = nb::cast<std::vector<std::string>>(v);
    } else if (key == "stop_at_eos") {
      o.stop_at_eos = nb::cast<bool>(v);
    } else if (key == "separate_newline") {
      o.separate_newline = nb::cast<bool>(v);
    } else if (key == "pan_and_scan") {
      if (!v.is_none()) o.pan_and_scan = nb::cast<bool>(v);
    } else if (key == "min_pixels") {
      o.image_resize.min_pixels = nb::cast<int64_t>(v);
    } else if (key == "max_pixels") {
      o.image_resize.max_pixels = nb::cast<int64_t>(v);
    } else if (key == "date") {
      o.date = nb::cast<std::string>(v);
    } else if (key == "json_schema") {
      o.json_schema = nb::cast<std::string>(v);
    } else if (key == "json_object") {
      o.json_object = nb::cast<bool>(v);
    } else if (key == "regex") {
      o.regex = nb::cast<std::string>(v);
    } else {
      throw nb::key_error(("unknown generate option: " + key).c_str());
    }
  }
  return o;
}

// Messages as the package sends them: [(role, [str text | None for an image, ...]), ...].
std::vector<ocular::ChatMessage> ToMessages(nb::handle list) {
  std::vector<ocular::ChatMessage> messages;
  for (nb::handle m : list) {
    nb::tuple t = nb::cast<nb::tuple>(m);
    ocular::ChatMessage msg;
    msg.role = nb::cast<std::string>(t[0]);
    for (nb::handle part : t[1]) {
      if (part.is_none()) {
        msg.content.push_back({true, ""});
      } else {
        msg.content.push_back({false, nb::cast<std::string>(part)});
      }
    }
    messages.push_back(std::move(msg));
  }
  return messages;
}

// One request, converted while the GIL is held.
struct Request {
  std::vector<ocular::ImageInput> images;
  std::string prompt;
  bool chat = false;
  std::vector<ocular::ChatMessage> messages;
  ocular::GenerateOptions options;
};

Request ToRequest(nb::handle images, nb::handle prompt, nb::handle messages, nb::dict options) {
  Request r;
  r.images = ToImages(images);
  r.options = ToOptions(options);
  if (!messages.is_none()) {
    r.chat = true;
    r.messages = ToMessages(messages);
  } else {
    r.prompt = nb::cast<std::string>(prompt);
  }
  return r;
}

bool OnMainThread() {
  nb::module_ threading = nb::module_::import_("threading");
  return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

nb::bytes Bytes(const std::vector<uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

nb::dict DetectionDict(const ocular::Detection& d) {
  nb::dict out;
  out["box"] = nb::make_tuple(d.x0, d.y0, d.x1, d.y1);
  out["label"] = d.label;
  out["loc"] = nb::make_tuple(d.loc[0], d.loc[1], d.loc[2], d.loc[3]);
  out["seg"] = d.seg;
  if (d.mask) {
    const ocular::InstanceMask& m = *d.mask;
    out["mask"] =
        nb::make_tuple(m.image_width, m.image_height, m.x0, m.y0, m.width, m.height, Bytes(m.bits));
  } else {
    out["mask"] = nb::none();
  }
  return out;
}

// The engine with the options it was loaded with.
class Model {
 public:
  Model(std::unique_ptr<ocular::Engine> engine, std::string path, std::string seg_model)
      : engine_(std::move(engine)), path_(std::move(path)), seg_model_(std::move(seg_model)) {}

  static Model* Load(const std::string& path, int threads, const std::string& precision,
                     const std::string& kv_cache, const std::string& quant_activations,
                     int max_batch, size_t image_cache_bytes, int64_t max_image_pixels,
                     int64_t min_pixels, int64_t max_pixels, const std::string& seg_model,
                     const std::string& mmproj) {
    ocular::EngineOptions o;
    o.mmproj = mmproj;
    o.threads = threads;
    o.precision = precision;
    o.kv_cache = kv_cache;
    o.quant_activations = quant_activations;
    o.max_batch = max_batch;
    o.image_cache_bytes = image_cache_bytes;
    o.max_image_pixels = max_image_pixels;
    o.image_resize = {min_pixels, max_pixels};
    auto engine = [&] {
      nb::gil_scoped_release release;
      return ocular::Engine::Load(path, o);
    }();
    return new Model(ValueOrRaise(std::move(engine)), path, seg_model);
  }

  // One request on the calling thread, the GIL released. `on_text(piece)` (or None) is called
  // with the GIL held; returning False or raising stops generation (an exception propagates).
  nb::dict Generate(nb::handle images, nb::handle prompt, nb::handle messages, nb::dict options,
                    nb::object on_text) {
    Request r = ToRequest(images, prompt, messages, options);
    const bool main = OnMainThread();
    bool python_error = false;
    ocular::TokenCallback cb;
    if (main || !on_text.is_none()) {
      cb = [&](const std::string& piece) {
        nb::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {  // Ctrl-C: KeyboardInterrupt is now set
          python_error = true;
          return false;
        }
        if (on_text.is_none()) return true;
        try {
          nb::object keep = on_text(piece);
          return !keep.is(Py_False);
        } catch (nb::python_error& e) {
          e.restore();
          python_error = true;
          return false;
        }
      };
    }
    ocular::StatusOr<ocular::GenerateResult> result = Run(r, cb);
    if (python_error) throw nb::python_error();
    return ResultDict(ValueOrRaise(std::move(result)));
  }

  // Every request on its own thread (so the engine decodes them together), the GIL released;
  // the calling thread waits and checks for Ctrl-C, which cancels them all. Returns, in order,
  // a result dict or the error (an OcularError instance) of each request.
  nb::list GenerateBatch(nb::handle requests, nb::object make_error) {
    std::vector<Request> reqs;
    for (nb::handle h : requests) {
      nb::tuple t = nb::cast<nb::tuple>(h);
      reqs.push_back(ToRequest(t[0], t[1], t[2], nb::cast<nb::dict>(t[3])));
    }
    std::vector<ocular::StatusOr<ocular::GenerateResult>> results(
        reqs.size(), ocular::Status(ocular::StatusCode::kInternal, "[python] not run"));
    std::atomic<bool> cancel{false};
    bool interrupted = false;
    {
      nb::gil_scoped_release release;
      RunAll(reqs, &results, &cancel, &interrupted);
    }
    if (interrupted) throw nb::python_error();
    nb::list out;
    for (auto& r : results) {
      if (r.ok()) {
        out.append(ResultDict(std::move(r).value()));
      } else {
        out.append(make_error(static_cast<int>(r.status().code()),
                              ocular::StatusCodeName(r.status().code()), r.status().message()));
      }
    }
    return out;
  }

  nb::dict Info() const {
    const ocular::ModelInfo i = engine_->Info();
    nb::dict d;
    d["architecture"] = i.architecture;
    d["image_size"] = i.image_size;
    d["image_tokens"] = i.image_tokens;
    d["vocab_size"] = i.vocab_size;
    d["weight_dtype"] = i.weight_dtype;
    d["weight_formats"] = i.weight_formats;
    d["weight_bytes"] = i.weight_bytes;
    d["threads"] = i.threads;
    d["isa"] = i.isa;
    d["precision"] = i.precision;
    d["kv_cache"] = i.kv_cache;
    d["quant_activations"] = i.quant_activations;
    d["chat_format"] = i.chat_format;
    d["image_marker"] = i.image_marker;
    return d;
  }

  nb::dict Stats() const {
    const ocular::EngineStats s = engine_->Stats();
    nb::dict d;
    d["decode_steps_by_batch"] = s.decode_steps_by_batch;
    d["running"] = s.running;
    d["waiting"] = s.waiting;
    d["prefills"] = s.prefills;
    d["images_encoded"] = s.images_encoded;
    d["image_cache_hits"] = s.image_cache_hits;
    d["image_cache_misses"] = s.image_cache_misses;
    d["kv_bytes_in_use"] = s.kv_bytes_in_use;
    d["kv_bytes_pooled"] = s.kv_bytes_pooled;
    return d;
  }

  std::vector<int32_t> Tokenize(const std::string& text) const {
    return ValueOrRaise(engine_->Tokenize(text));
  }
  std::string Detokenize(const std::vector<int32_t>& ids, bool skip_special) const {
    return engine_->Detokenize(ids, skip_special);
  }

 private:
  ocular::StatusOr<ocular::GenerateResult> Run(const Request& r, const ocular::TokenCallback& cb) {
    nb::gil_scoped_release release;
    return r.chat ? engine_->GenerateChat(r.images, r.messages, r.options, cb)
                  : engine_->Generate(r.images, r.prompt, r.options, cb);
  }

  // REQUIRES: the GIL is not held (it is taken only to check for signals).
  void RunAll(const std::vector<Request>& reqs,
              std::vector<ocular::StatusOr<ocular::GenerateResult>>* results,
              std::atomic<bool>* cancel, bool* interrupted) {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::condition_variable cv;
    size_t done = 0;
    const ocular::TokenCallback cb = [cancel](const std::string&) { return !cancel->load(); };
    // More threads than the engine batches keep its batch full as requests finish.
    const size_t workers = std::min(reqs.size(), size_t{64});
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < reqs.size();) {
          const Request& r = reqs[i];
          (*results)[i] = cancel->load()
                              ? ocular::Status(ocular::StatusCode::kInternal, "[python] cancelled")
                          : r.chat ? engine_->GenerateChat(r.images, r.messages, r.options, cb)
                                   : engine_->Generate(r.images, r.prompt, r.options, cb);
        }
        std::lock_guard<std::mutex> lock(mu);
        ++done;
        cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mu);
    while (done < workers) {
      if (cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done == workers; })) break;
      lock.unlock();
      {
        nb::gil_scoped_acquire gil;
        if (!*interrupted && PyErr_CheckSignals() != 0) {
          *interrupted = true;
          cancel->store(true);
        }
      }
      lock.lock();
    }
    lock.unlock();
    for (std::thread& t : threads) t.join();
  }

  nb::dict ResultDict(ocular::GenerateResult r) const {
    nb::dict d;
    d["text"] = r.text;
    d["raw_text"] = r.raw_text;
    d["finish_reason"] = r.finish_reason;
    d["prompt_ids"] = r.prompt_ids;
    d["output_ids"] = r.output_ids;
    nb::list sizes;
    for (const auto& s : r.image_sizes) sizes.append(nb::make_tuple(s.width, s.height));
    d["image_sizes"] = sizes;
    nb::dict timings;
    timings["image_ms"] = r.timings.image_ms;
    timings["prefill_ms"] = r.timings.prefill_ms;
    timings["decode_ms"] = r.timings.decode_ms;
    timings["prefill_tokens"] = r.timings.prefill_tokens;
    timings["decode_tokens"] = r.timings.decode_tokens;
    timings["constraint_ms"] = r.timings.constraint_ms;
    d["timings"] = timings;
    nb::list detections;
    d["mask_warning"] = "";
    if (!r.image_sizes.empty()) {
      // As `ocular run` and `ocular serve`: boxes in the first image's pixels, masks from the
      // mask model next to the checkpoint (or seg_model) when the answer has seg codes.
      const int w = r.image_sizes[0].width, h = r.image_sizes[0].height;
      std::vector<ocular::Detection> boxes = ocular::ParseDetections(r.text, w, h);
      if (ocular::HasSegCodes(boxes)) {
        const ocular::MaskDecoder* masks = MaskModel();
        if (masks == nullptr) {
          d["mask_warning"] = "no mask model (vae-oid.npz or vae.safetensors) next to " + path_ +
                              ": the detections keep their seg codes";
        } else if (int bad = masks->AddMasks(&boxes, w, h); bad > 0) {
          d["mask_warning"] = std::to_string(bad) + " detection(s) with seg codes outside the " +
                              "mask model's codebook got no mask";
        }
      }
      for (const ocular::Detection& b : boxes) detections.append(DetectionDict(b));
    }
    d["detections"] = detections;
    return d;
  }

  // The mask model of `segment` answers (seg_model, else the one next to the checkpoint, as
  // AttachMasks finds it), loaded at the first answer with seg codes and kept; null if none.
  const ocular::MaskDecoder* MaskModel() const {
    std::lock_guard<std::mutex> lock(mask_mu_);
    if (!mask_tried_) {
      const std::string file = seg_model_.empty() ? ocular::FindMaskModel(path_) : seg_model_;
      if (!file.empty()) mask_ = ValueOrRaise(ocular::MaskDecoder::Load(file));
      mask_tried_ = true;
    }
    return mask_.get();
  }

  std::unique_ptr<ocular::Engine> engine_;
  std::string path_;
  std::string seg_model_;
  mutable std::mutex mask_mu_;
  mutable bool mask_tried_ = false;
  mutable std::unique_ptr<ocular::MaskDecoder> mask_;
};

}  // namespace

NB_MODULE(_ocular, m) {
  m.doc() = "ocular's C++ engine (internal: use the ocular package)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object err =
          nb::module_::import_("ocular.errors")
              .attr("from_status")(static_cast<int>(e.status.code()),
                                   ocular::StatusCodeName(e.status.code()), e.status.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
  nb::class_<Model>(m, "Engine")
      .def_static("load", &Model::Load, "path"_a, "threads"_a, "precision"_a, "kv_cache"_a,
                  "quant_activations"_a, "max_batch"_a, "image_cache_bytes"_a, "max_image_pixels"_a,
                  "min_pixels"_a, "max_pixels"_a, "seg_model"_a, "mmproj"_a,
                  nb::rv_policy::take_ownership)
      .def("generate", &Model::Generate, "images"_a, "prompt"_a.none(), "messages"_a.none(),
           "options"_a, "on_text"_a.none())
      .def("generate_batch", &Model::GenerateBatch, "requests"_a, "make_error"_a)
      .def("info", &Model::Info)
      .def("stats", &Model::Stats)
      .def("tokenize", &Model::Tokenize, "text"_a)
      .def("detokenize", &Model::Detokenize, "ids"_a, "skip_special"_a);
}
