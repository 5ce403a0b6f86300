#ifndef VIGIL_COPENSSL_SHIM_H
#define VIGIL_COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#endif
