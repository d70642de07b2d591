// SPDX-License-Identifier: Apache-2.0
// OCP FP8 E4M3 conversions, operation for operation those of kernels/common/e4m3.h (round to
// nearest even, saturating to +-448, any NaN to 0x7F), so that Vulkan rounds bit for bit as the
// host, CUDA and HIP kernels do. Integer operations only: the float mode cannot change a result.

// Rounds `value >> shift` to nearest even; shift in [1, 31].
uint gpuplug_rne_shift(uint value, uint shift) {
  uint q = value >> shift;
  const uint rem = value & ((1u << shift) - 1u);
  const uint half_ = 1u << (shift - 1u);
  if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q += 1u;
  return q;
}

uint gpuplug_f32_to_e4m3(float f) {
  const uint bits = floatBitsToUint(f);
  const uint sign = (bits >> 24) & 0x80u;
  const uint mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7Fu;
  if (mag >= 0x43E00000u) return sign | 0x7Eu;
  const int e = int(mag >> 23) - 127;
  if (mag < 0x00800000u) return sign;
  const uint mant = (mag & 0x7FFFFFu) | 0x800000u;
  if (e < -6) {
    const uint shift = uint(14 - e);
    if (shift > 31u) return sign;
    return sign | gpuplug_rne_shift(mant, shift);
  }
  uint v = (uint(e + 7) << 3) + gpuplug_rne_shift(mant, 20u) - 8u;
  if (v > 0x7Eu) v = 0x7Eu;
  return sign | v;
}

// The f32 bits of E4M3 code `b` (the caller stores bits, so no float operation touches a NaN).
uint gpuplug_e4m3_to_f32_bits(uint b) {
  const uint e = (b >> 3) & 0xFu;
  const uint m = b & 0x7u;
  uint bits;
  if (e == 0xFu && m == 0x7u) {
    bits = 0x7FC00000u;
  } else if (e == 0u) {
    const uint p = m >= 4u ? 2u : (m >= 2u ? 1u : 0u);
    bits = m == 0u ? 0u : ((118u + p) << 23) | ((m << (23u - p)) & 0x7FFFFFu);
  } else {
    bits = ((e + 120u) << 23) | (m << 20);
  }
  return bits | ((b & 0x80u) << 24);
}
