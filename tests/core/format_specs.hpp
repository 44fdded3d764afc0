// Pairs each fp8 type beyond OCP FP8 with its independent reference description (reference_formats.hpp).
#pragma once

#include <fp8/types.hpp>

#include "reference_formats.hpp"

namespace reference {

template <class T>
const format_spec& spec_of();
template <>
inline const format_spec& spec_of<fp8::fp4_e2m1>() {
  return e2m1;
}
template <>
inline const format_spec& spec_of<fp8::fp6_e2m3>() {
  return e2m3;
}
template <>
inline const format_spec& spec_of<fp8::fp6_e3m2>() {
  return e3m2;
}
template <>
inline const format_spec& spec_of<fp8::fp8_e4m3fnuz>() {
  return e4m3fnuz;
}
template <>
inline const format_spec& spec_of<fp8::fp8_e5m2fnuz>() {
  return e5m2fnuz;
}
template <>
inline const format_spec& spec_of<fp8::fp8_e3m4>() {
  return e3m4;
}
template <>
inline const format_spec& spec_of<fp8::fp8_e4m3_ieee>() {
  return e4m3_ieee;
}
template <>
inline const format_spec& spec_of<fp8::fp8_ue4m3>() {
  return ue4m3;
}

}  // namespace reference

#define FP8_NEW_FORMAT_TYPES                                                                        \
  fp8::fp4_e2m1, fp8::fp6_e2m3, fp8::fp6_e3m2, fp8::fp8_e4m3fnuz, fp8::fp8_e5m2fnuz, fp8::fp8_e3m4, \
      fp8::fp8_e4m3_ieee, fp8::fp8_ue4m3
