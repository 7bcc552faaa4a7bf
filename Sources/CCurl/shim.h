#ifndef LBS_CCURL_SHIM_H
#define LBS_CCURL_SHIM_H

/*
 * Typed wrappers around libcurl's variadic functions, which Swift cannot import,
 * plus a small OpenSSL helper for trust-on-first-use public key pins.
 * Everything is static inline so no C target is needed.
 */

#include <curl/curl.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

typedef size_t (*lbs_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);

static inline CURLcode lbs_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* MARK: curl_easy_setopt */

static inline CURLcode lbs_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode lbs_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/* For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (same signature). */
static inline CURLcode lbs_easy_setopt_data_callback(CURL *handle, CURLoption option, lbs_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/* MARK: curl_multi_setopt */

static inline CURLMcode lbs_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* MARK: curl_easy_getinfo */

static inline CURLcode lbs_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode lbs_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    return curl_easy_getinfo(handle, info, value);
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
    if (curl_easy_getinfo(handle, CURLINFO_CERTINFO, &chain) != CURLE_OK || chain == NULL || chain->num_of_certs < 1) {
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
