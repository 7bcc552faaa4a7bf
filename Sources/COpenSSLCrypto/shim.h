// OpenSSL's libcrypto (Debian's libssl-dev): big-number arithmetic for SRP sign-ins.
#include <openssl/bn.h>
