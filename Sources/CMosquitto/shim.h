#ifndef LBS_CMOSQUITTO_SHIM_H
#define LBS_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* The X509 verify result of the handshake in progress (-1 without a TLS session). libmosquitto logs
   OpenSSL's generic "certificate verify failed" only; this says which check failed (unknown CA, expired…).
   Valid inside libmosquitto's log callback, which runs before it frees the session. */
static inline long lbs_mosquitto_tls_verify_result(struct mosquitto *mosq) {
    SSL *ssl = (SSL *)mosquitto_ssl_get(mosq);
    return ssl ? SSL_get_verify_result(ssl) : -1;
}

/* OpenSSL's text for a verify result. */
static inline const char *lbs_tls_verify_error_string(long code) {
    return X509_verify_cert_error_string(code);
}
#endif
