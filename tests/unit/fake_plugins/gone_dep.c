/* SPDX-License-Identifier: Apache-2.0
 * The library missing_dependency.c links against; its SONAME names a file that is never shipped. */
int gpuplug_fake_gone_value(void) { return 42; }
