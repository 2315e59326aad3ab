// FunctionRef<R(Args...)>: a non-owning reference to a callable, like absl::FunctionRef.
// Unlike std::function it never allocates, so hot loops (ThreadPool::ParallelFor in a decode
// step) can pass lambdas that capture many variables by reference.
// REQUIRES: the callable outlives the FunctionRef (pass temporaries only as call arguments).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ocular {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): implicit, like a reference
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace ocular
