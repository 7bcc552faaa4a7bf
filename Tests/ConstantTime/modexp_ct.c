// Constant-time check of Sources/CModExp (the "ctgrind" method): the base and the exponent are marked as
// undefined memory for valgrind's memcheck, which then reports every branch and every memory address that
// depends on them ("Conditional jump or move depends on uninitialised value(s)", "Use of uninitialised value
// of size 8"). A constant-time modexp makes no such report. Run by ConstantTimeTests (valgrind --error-exitcode).
#include <stdint.h>
#include <string.h>
#include <valgrind/memcheck.h>
#include "CModExp.h"

enum { LIMBS = 48 };  // 3072 bits, the SRP group Cognito and HAP use

static uint64_t state = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {  // splitmix64: fixed inputs, so every run checks the same numbers
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

int main(void) {
    uint64_t modulus[LIMBS], base[LIMBS], exponent[LIMBS / 2], result[LIMBS];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < LIMBS; i++) modulus[i] = next();
        modulus[0] |= 1;
        modulus[LIMBS - 1] |= (uint64_t)1 << 63;
        for (int i = 0; i < LIMBS; i++) base[i] = next();
        base[LIMBS - 1] >>= 1;  // below the modulus
        for (int i = 0; i < LIMBS / 2; i++) exponent[i] = next();
        VALGRIND_MAKE_MEM_UNDEFINED(base, sizeof base);
        VALGRIND_MAKE_MEM_UNDEFINED(exponent, sizeof exponent);
        if (lbs_modexp(base, exponent, LIMBS / 2, modulus, LIMBS, result) != 0) return 2;
        // The result is public again (it is sent); only how it was computed must not depend on the secrets.
        VALGRIND_MAKE_MEM_DEFINED(result, sizeof result);
        VALGRIND_MAKE_MEM_DEFINED(base, sizeof base);
        VALGRIND_MAKE_MEM_DEFINED(exponent, sizeof exponent);
    }
    return 0;
}
