#ifndef LBS_CCURL_SHIM_H
#define LBS_CCURL_SHIM_H

/*
 * libcurl, loaded on first use (curl_loader.c), with typed wrappers around its variadic functions, which Swift
 * cannot import, plus a small OpenSSL helper for trust-on-first-use public key pins.
 *
 * Why loaded, not linked: libcurl brings about 25 shared libraries (GnuTLS, Kerberos, LDAP, SSH, RTMP, ...) whose
 * loading and constructors cost ~3.8 MB of resident memory in every gateway, also in one whose vendors need no
 * HTTP (Matter, HomeKit, MQTT only). Nothing here is linked against libcurl: every call goes through `lbs_curl`,
 * filled by `lbs_curl_global_init` (CurlGlobal in CurlHTTP calls it before any handle exists).
 */

#include <curl/curl.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

typedef size_t (*lbs_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);

/* The libcurl functions the gateway uses, resolved from libcurl.so.4. */
struct lbs_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
    void (*slist_free_all)(struct curl_slist *list);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *handle);
    CURLMcode (*multi_perform)(CURLM *multi, int *running);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *remaining);
    CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd extra[], unsigned int count, int timeout, int *ready);
    CURLMcode (*multi_wakeup)(CURLM *multi);
    const char *(*multi_strerror)(CURLMcode code);
};

/* Filled once by lbs_curl_global_init; read only after it succeeded. */
extern struct lbs_curl_api lbs_curl;

/* Loads libcurl and runs curl_global_init, once per process (thread-safe). CURLE_FAILED_INIT when libcurl could
   not be loaded (lbs_curl_load_error says why). */
CURLcode lbs_curl_global_init(void);

/* Why libcurl could not be loaded (dlopen's or dlsym's message), or NULL. */
const char *lbs_curl_load_error(void);

/* MARK: plain calls */

static inline CURL *lbs_curl_easy_init(void) { return lbs_curl.easy_init(); }
static inline void lbs_curl_easy_cleanup(CURL *handle) { lbs_curl.easy_cleanup(handle); }
static inline const char *lbs_curl_easy_strerror(CURLcode code) { return lbs_curl.easy_strerror(code); }
static inline struct curl_slist *lbs_curl_slist_append(struct curl_slist *list, const char *text) {
    return lbs_curl.slist_append(list, text);
}
static inline void lbs_curl_slist_free_all(struct curl_slist *list) { lbs_curl.slist_free_all(list); }
static inline CURLM *lbs_curl_multi_init(void) { return lbs_curl.multi_init(); }
static inline CURLMcode lbs_curl_multi_cleanup(CURLM *multi) { return lbs_curl.multi_cleanup(multi); }
static inline CURLMcode lbs_curl_multi_add_handle(CURLM *multi, CURL *handle) { return lbs_curl.multi_add_handle(multi, handle); }
static inline CURLMcode lbs_curl_multi_remove_handle(CURLM *multi, CURL *handle) { return lbs_curl.multi_remove_handle(multi, handle); }
static inline CURLMcode lbs_curl_multi_perform(CURLM *multi, int *running) { return lbs_curl.multi_perform(multi, running); }
static inline CURLMsg *lbs_curl_multi_info_read(CURLM *multi, int *remaining) { return lbs_curl.multi_info_read(multi, remaining); }
static inline CURLMcode lbs_curl_multi_poll(CURLM *multi, struct curl_waitfd extra[], unsigned int count, int timeout, int *ready) {
    return lbs_curl.multi_poll(multi, extra, count, timeout, ready);
}
static inline CURLMcode lbs_curl_multi_wakeup(CURLM *multi) { return lbs_curl.multi_wakeup(multi); }
static inline const char *lbs_curl_multi_strerror(CURLMcode code) { return lbs_curl.multi_strerror(code); }

/* MARK: curl_easy_setopt */

static inline CURLcode lbs_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return lbs_curl.easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return lbs_curl.easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return lbs_curl.easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return lbs_curl.easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return lbs_curl.easy_setopt(handle, option, value);
}

/* For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (same signature). */
static inline CURLcode lbs_easy_setopt_data_callback(CURL *handle, CURLoption option, lbs_curl_data_callback callback) {
    return lbs_curl.easy_setopt(handle, option, callback);
}

/* MARK: curl_multi_setopt */

static inline CURLMcode lbs_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return lbs_curl.multi_setopt(multi, option, value);
}

/* MARK: curl_easy_getinfo */

static inline CURLcode lbs_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return lbs_curl.easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return lbs_curl.easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return lbs_curl.easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    return lbs_curl.easy_getinfo(handle, info, value);
}

/* MARK: curl_multi_info_read (CURLMsg holds a union) */

static inline CURLcode lbs_curlmsg_result(const CURLMsg *message) {
    return message->data.result;
}

/* MARK: TLS public key pins */

/*
 * SHA-256 of the DER SubjectPublicKeyInfo of the leaf certificate a finished
 * transfer saw (needs CURLOPT_CERTINFO=1). This is the value curl compares for
 * CURLOPT_PINNEDPUBLICKEY "sha256//...". Returns 0 on success, -1 when no leaf
 * certificate was captured, -2 when it could not be parsed or hashed.
 */
static inline int lbs_leaf_spki_sha256(CURL *handle, unsigned char digest[32]) {
    struct curl_certinfo *chain = NULL;
    if (lbs_curl.easy_getinfo(handle, CURLINFO_CERTINFO, &chain) != CURLE_OK || chain == NULL || chain->num_of_certs < 1) {
        return -1;
    }
    const char *pem = NULL;
    for (struct curl_slist *field = chain->certinfo[0]; field != NULL; field = field->next) {
        if (strncmp(field->data, "Cert:", 5) == 0) {
            pem = field->data + 5;
            break;
        }
    }
    if (pem == NULL) {
        return -1;
    }
    BIO *bio = BIO_new_mem_buf(pem, -1);
    if (bio == NULL) {
        return -2;
    }
    X509 *cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (cert == NULL) {
        return -2;
    }
    unsigned char *der = NULL;
    int der_length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    X509_free(cert);
    if (der_length <= 0 || der == NULL) {
        return -2;
    }
    unsigned int digest_length = 0;
    int ok = EVP_Digest(der, (size_t)der_length, digest, &digest_length, EVP_sha256(), NULL);
    OPENSSL_free(der);
    return (ok == 1 && digest_length == 32) ? 0 : -2;
}

#endif
