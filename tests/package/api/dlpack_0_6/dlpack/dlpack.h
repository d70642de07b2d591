/* SPDX-License-Identifier: Apache-2.0
 * Stands for another DLPack on the application's include path (Debian 12's libdlpack-dev is
 * 0.6): api.dlpack puts this folder first, and the installed <gpuplug/dlpack.hpp> must use the
 * header the kit carries, never this one. */
#error "<gpuplug/dlpack.hpp> included the application's <dlpack/dlpack.h>, not the kit's own"
