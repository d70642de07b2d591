// SPDX-License-Identifier: Apache-2.0
// What every gpuplug Vulkan kernel shares: the extensions for device addresses and 64/8-bit types,
// and the buffer-reference types its arguments use (each is one 8-byte device pointer).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer F32In { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Out { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32Out { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) readonly buffer U8In { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8Out { uint8_t v[]; };
