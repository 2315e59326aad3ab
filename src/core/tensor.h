// Element types and non-owning tensor views.
//
// Layout convention (docs/architecture.md): row-major, last dimension contiguous.
// Activations are [tokens, features]; linear weights are HF's [out_features, in_features].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ocular {

enum class DType : uint8_t { kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF64 };

size_t DTypeSize(DType t);
const char* DTypeName(DType t);  // safetensors spelling: "F32", "BF16", ...
// Parses a safetensors dtype string; false if unknown.
bool ParseDType(std::string_view name, DType* out);

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2,3]"

// A read-only view of a tensor stored elsewhere (a mapped file, an arena).
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  int64_t numel() const { return NumElements(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

// An owning f32 tensor: the activation type of the CPU backend.
struct Tensor {
  Shape shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(NumElements(shape))) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  float* row(int64_t r) { return data.data() + r * shape.back(); }
  const float* row(int64_t r) const { return data.data() + r * shape.back(); }
  TensorView view() const { return TensorView{data.data(), DType::kF32, shape}; }
};

}  // namespace ocular
