// NumPy .npy arrays and .npz archives (numpy.save / numpy.savez / numpy.savez_compressed).
//
// .npy (numpy/lib/format.py, format versions 1.0, 2.0 and 3.0):
//   "\x93NUMPY" major minor, header length (u16 little-endian for 1.0, u32 for 2.0/3.0),
//   an ASCII (3.0: UTF-8) Python dict literal
//     {'descr': '<f4', 'fortran_order': False, 'shape': (128, 512), }
//   padded with spaces and ended by '\n', then the raw C-order data.
// .npz: a zip archive whose members are "<name>.npy"; the array's name is the member name
//   without ".npy" (what np.load(...).keys() lists). Members may be stored or deflated; the
//   zip is read with libzip (CRC-checked), never with a hand-written inflater.
//
// Both are untrusted input: every header field is checked before use, sizes are bounded
// before anything is allocated, and every error is a Status tagged [npz] naming the file and
// member — never an abort.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "ocular/status.h"

namespace ocular {

// Caps: far above the PaliGemma mask VAE (vae-oid.npz, ~10 MB), low enough that a crafted
// archive cannot exhaust memory before a clear error (kResourceExhausted).
inline constexpr int64_t kMaxNpzFileBytes = int64_t{1} << 30;          // the archive on disk
inline constexpr int64_t kMaxNpzUncompressedBytes = int64_t{1} << 30;  // all members together
inline constexpr int kMaxNpzMembers = 4096;
inline constexpr int kMaxNpyDims = 32;  // numpy's NPY_MAXDIMS (64 in numpy 2) is the real cap

// One array: dtype, shape and its little-endian C-order bytes (owned).
struct NpyArray {
  DType dtype = DType::kF32;
  Shape shape;
  std::string bytes;  // numel * DTypeSize(dtype) bytes

  TensorView view() const { return TensorView{bytes.data(), dtype, shape}; }
};

// The parsed header of an .npy file.
struct NpyHeader {
  DType dtype = DType::kF32;
  Shape shape;
  size_t data_offset = 0;  // where the data starts (10 or 12 + header length)
};

// Parses and validates the header at the start of `npy`: magic, version 1.0/2.0/3.0, a dict
// with exactly the keys 'descr', 'fortran_order', 'shape'; descr one of <f2 <f4 <f8 <i1..<i8
// |u1 |b1 (little-endian or byte-sized; big-endian and structured dtypes are kUnimplemented);
// fortran_order False (True is kUnimplemented); dims non-negative with a product that fits.
// `where` names the source in errors ("vae-oid.npz:decoder.0.weight.npy").
StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy, std::string_view where);

// Parses a whole .npy: header, then exactly numel * itemsize data bytes (trailing or missing
// bytes are kDataLoss).
StatusOr<NpyArray> ParseNpy(std::string_view npy, std::string_view where);

// The arrays of an .npz archive, by name (member name without ".npy").
class NpzFile {
 public:
  // Reads `path` (a regular file of at most kMaxNpzFileBytes) and parses it.
  static StatusOr<NpzFile> Open(const std::string& path);
  // Parses an archive held in memory; `name` is used in errors.
  static StatusOr<NpzFile> FromBytes(std::string_view bytes, const std::string& name);

  const std::string& name() const { return name_; }
  const std::map<std::string, NpyArray>& arrays() const { return arrays_; }
  // nullptr if absent.
  const NpyArray* Find(const std::string& array_name) const;

 private:
  std::string name_;
  std::map<std::string, NpyArray> arrays_;
};

}  // namespace ocular
