#ifndef VIGIL_CZLIB_SHIM_H
#define VIGIL_CZLIB_SHIM_H
// zlib for permessage-deflate (RFC 7692). zlib.h's init entry points are macros that pass the
// library version and sizeof(z_stream) for an ABI check; Swift cannot import function-like
// macros, so each is wrapped in a static inline function here and nothing else is added.
#include <zlib.h>

/// deflateInit2 for a raw DEFLATE stream (RFC 1951, no zlib header or checksum: RFC 7692 §7.2.1).
/// windowBits is positive here and negated for zlib's "raw" convention.
static inline int vigil_deflate_init_raw(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, -windowBits, memLevel, Z_DEFAULT_STRATEGY);
}

/// inflateInit2 for a raw DEFLATE stream (RFC 7692 §7.2.2).
static inline int vigil_inflate_init_raw(z_streamp stream, int windowBits) {
    return inflateInit2(stream, -windowBits);
}

#endif
