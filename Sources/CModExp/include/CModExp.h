#ifndef LBS_CMODEXP_H
#define LBS_CMODEXP_H

#include <stddef.h>
#include <stdint.h>

/// result = base^exponent mod modulus, for SRP's 3072-bit group (any odd modulus of up to 64 limbs).
/// Numbers are little-endian arrays of 64-bit limbs; base, modulus and result have `limbs` limbs, the
/// exponent `exponent_limbs`. base must be below the modulus. Montgomery multiplication, with a multiply on
/// every exponent bit (the operand picked by mask), so the time does not depend on the exponent's bits.
/// Returns 0, or -1 when the modulus is even or too long.
int lbs_modexp(const uint64_t *base, const uint64_t *exponent, size_t exponent_limbs,
               const uint64_t *modulus, size_t limbs, uint64_t *result);

#endif
