/* SPDX-License-Identifier: MIT */
/* iomux's libevent 2.1 emulation: the export marker libevent's headers put on every
 * public function. */
#ifndef IOMUX_EVENT2_VISIBILITY_H_INCLUDED_
#define IOMUX_EVENT2_VISIBILITY_H_INCLUDED_

#if defined(EVX_BUILDING_SHARED) && defined(_WIN32)
#define EVENT2_EXPORT_SYMBOL __declspec(dllexport)
#elif defined(EVX_BUILDING_SHARED) && defined(__GNUC__)
#define EVENT2_EXPORT_SYMBOL __attribute__((visibility("default")))
#else
#define EVENT2_EXPORT_SYMBOL
#endif
#define EVENT2_CORE_EXPORT_SYMBOL EVENT2_EXPORT_SYMBOL

#endif /* IOMUX_EVENT2_VISIBILITY_H_INCLUDED_ */
