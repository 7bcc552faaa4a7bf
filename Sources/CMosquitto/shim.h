#ifndef LBS_CMOSQUITTO_SHIM_H
#define LBS_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdint.h>
#include <string.h>

/* Holds (1) or releases and sends (0) partial TCP frames on the client's socket: packets written while corked
   leave as full segments when the cork is released. Returns -1 (errno set) on a socket that is not TCP. */
static inline int lbs_tcp_cork(int fd, int on) {
    return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

/* Segments the socket sent so far: `tcpi_segs_out` of Linux's struct tcp_info, read at its fixed UAPI offset (136)
   because glibc's copy of the struct ends before it. -1 when the socket cannot say. For tests and diagnostics. */
static inline long lbs_tcp_segments_sent(int fd) {
    unsigned char info[232];
    memset(info, 0, sizeof info);
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &length) != 0 || length < 140) return -1;
    uint32_t segments;
    memcpy(&segments, info + 136, sizeof segments);
    return (long)segments;
}

/* Acknowledges what arrived at once instead of after the delayed-ACK timer (Linux clears it again by itself). */
static inline int lbs_tcp_quickack(int fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
}

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
