/* Signing webhook requests (notify/notify.h, "Signed requests"): HMAC-SHA256
 * from libcrypto, in the three shapes the services check. */
#include "notify/notify.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdio.h>
#include <string.h>

bool cp_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    unsigned char mac[CP_HMAC_SHA256_LEN])
{
    unsigned int n = 0;
    /* HMAC() wants a non-NULL data pointer even for an empty message. */
    static const unsigned char empty[1];
    if (key_len > (size_t)INT32_MAX)
        return false;
    return HMAC(EVP_sha256(), key, (int)key_len, msg_len ? msg : empty, msg_len, mac, &n) &&
           n == CP_HMAC_SHA256_LEN;
}

/* Standard base64 of the 32-byte MAC into out (45 bytes with the NUL). */
static void base64_mac(const unsigned char mac[CP_HMAC_SHA256_LEN], char *out)
{
    EVP_EncodeBlock((unsigned char *)out, mac, CP_HMAC_SHA256_LEN);
}

enum cp_status cp_notify_sign(enum cp_webhook_format f, const char *secret, int64_t now_ms,
                              const char *body, size_t body_len, struct cp_notify_signature *out,
                              struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!secret || !*secret)
        return cp_diag_set(d, CP_ERR_INVALID, "webhook: the signing secret is empty");
    unsigned char mac[CP_HMAC_SHA256_LEN];
    struct cp_buf m;
    cp_buf_init(&m);
    const char *key = secret;
    size_t key_len = strlen(secret);
    switch (f) {
    case CP_WEBHOOK_FEISHU:
        /* seconds; the key is "<timestamp>\n<secret>", the message empty */
        snprintf(out->timestamp, sizeof out->timestamp, "%lld", (long long)(now_ms / 1000));
        cp_buf_printf(&m, "%s\n%s", out->timestamp, secret);
        key = m.data;
        key_len = m.len;
        break;
    case CP_WEBHOOK_DINGTALK:
        /* milliseconds; the key is the secret, the message
         * "<timestamp>\n<secret>" */
        snprintf(out->timestamp, sizeof out->timestamp, "%lld", (long long)now_ms);
        cp_buf_printf(&m, "%s\n%s", out->timestamp, secret);
        break;
    case CP_WEBHOOK_GENERIC:
        /* seconds; the message "<timestamp>.<body>" */
        snprintf(out->timestamp, sizeof out->timestamp, "%lld", (long long)(now_ms / 1000));
        cp_buf_printf(&m, "%s.", out->timestamp);
        cp_buf_append(&m, body ? body : "", body ? body_len : 0);
        break;
    default:
        cp_buf_release(&m);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "webhook: %s webhooks are not signed (the secret is in the URL); "
                           "drop the secret",
                           cp_webhook_format_name(f));
    }
    enum cp_status st = cp_buf_status(&m);
    if (st != CP_OK) {
        cp_buf_release(&m);
        return cp_diag_set(d, st, "webhook: out of memory signing the request");
    }
    bool ok = f == CP_WEBHOOK_FEISHU
                  ? cp_hmac_sha256(key, key_len, "", 0, mac)
                  : cp_hmac_sha256(key, key_len, m.data ? m.data : "", m.len, mac);
    cp_buf_release(&m);
    if (!ok)
        return cp_diag_set(d, CP_ERR_INTERNAL, "webhook: HMAC-SHA256 failed");
    if (f == CP_WEBHOOK_GENERIC) {
        memcpy(out->sign, "sha256=", 7);
        for (int i = 0; i < CP_HMAC_SHA256_LEN; i++)
            snprintf(out->sign + 7 + 2 * i, 3, "%02x", mac[i]);
    } else
        base64_mac(mac, out->sign);
    return CP_OK;
}
