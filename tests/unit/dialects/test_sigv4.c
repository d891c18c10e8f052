/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_sigv4.c - the SigV4 signer (dialects/sigv4.c) against AWS's
 * published SigV4 test suite (every "normalize": true case of
 * aws-c-auth tests/aws-signing-test-suite/v4/: request.txt's method, path, query and
 * headers with the suite's X-Amz-Date (and X-Amz-Security-Token,
 * X-Amz-Content-Sha256 where its signed request has them) in, the .creq, .sts and
 * Authorization texts out), and against aws-sdk-js-v3 signature-v4's own tests (the
 * path "/foo%3Dbar" encoded twice, with "/abc/../" and "//" normalized to the same
 * signature; a body; a session token), a Bedrock path's "%3A" signed as "%253A", the
 * date and payload hash helpers, refusals and running out of memory.
 * See: dialects/sigv4.c, dialects/sigv4.h
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/str.h"
#include "dialects/sigv4.h"

#define T_MAX_HDRS 8

struct t_vector {
    const char *name, *method, *path, *query;
    struct {
        const char *name, *value;
    } hdrs[T_MAX_HDRS];
    size_t n_hdrs;
    const char *payload_hash, *creq, *sts, *authz;
};

/* Generated from aws-c-auth's tests/aws-signing-test-suite/v4/<name>/ (request and
 * header-signed-request.txt for the inputs; header-canonical-request.txt,
 * header-string-to-sign.txt and the signed request's Authorization for the outputs). All
 * share the suite's context.json: AKIDEXAMPLE, us-east-1, service "service",
 * 2015-08-30T12:36:00Z. The "-unnormalized" cases are left out: they sign S3's way. */
static const struct t_vector t_suite[] = {
    {
        .name = "get-header-key-duplicate",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", "value2"},
                 {"My-Header1", "value2"},
                 {"My-Header1", "value1"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 5,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\nx-amz-date:"
                "20150830T123600Z\n\nhost;my-header1;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\ndc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;x-amz-date, "
                 "Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
    },
    {
        .name = "get-header-value-multiline",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", "value1\n  value2\n     value3"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 3,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1 value2 "
                "value3\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\ne99419459a677bc11de234014be3c4e72c1ea5b454ceb58b613061f5d7a162e8",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;x-amz-date, "
                 "Signature=cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd",
    },
    {
        .name = "get-header-value-order",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", "value4"},
                 {"My-Header1", "value1"},
                 {"My-Header1", "value3"},
                 {"My-Header1", "value2"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 6,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nmy-header1:value4,value1,value3,value2\nx-amz-"
                "date:20150830T123600Z\n\nhost;my-header1;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n31ce73cd3f3d9f66977ad3dd957dc47af14df92fcd8509f59b349e9137c58b86",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;x-amz-date, "
                 "Signature=08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
    },
    {
        .name = "get-header-value-trim",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", " value1"},
                 {"My-Header2", " \"a   b   c\""},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 4,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b "
                "c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\na726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;my-header2;x-amz-date, "
                 "Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
    },
    {
        .name = "get-relative-normalized",
        .method = "GET",
        .path = "/example/..",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "get-relative-relative-normalized",
        .method = "GET",
        .path = "/example1/example2/../..",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "get-slash-dot-slash-normalized",
        .method = "GET",
        .path = "/./",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "get-slash-normalized",
        .method = "GET",
        .path = "//",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "get-slash-pointless-dot-normalized",
        .method = "GET",
        .path = "/./example",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "example\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n214d50c111a8edc4819da6a636336472c916b5240f51e9a51b5c3305180cf702",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5",
    },
    {
        .name = "get-slashes-normalized",
        .method = "GET",
        .path = "//example//",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/example/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\ncb96b4ac96d501f7c5c15bc6d67b3035061cfced4af6585ad927f7e6c985c015",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84",
    },
    {
        .name = "get-space-normalized",
        .method = "GET",
        .path = "/example space/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/example%20space/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
    },
    {
        .name = "get-unreserved",
        .method = "GET",
        .path = "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n\nhost:"
                "example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
    },
    {
        .name = "get-utf8",
        .method = "GET",
        .path = "/\xe1"
                "\x88"
                "\xb4"
                "",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-"
                "amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
    },
    {
        .name = "get-vanilla-empty-query-key",
        .method = "GET",
        .path = "/",
        .query = "Param1=value1",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;"
                "x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n1e24db194ed7d0eec2de28d7369675a243488e08526e8c1c73571282f7c517ab",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb",
    },
    {
        .name = "get-vanilla-query-order-encoded",
        .method = "GET",
        .path = "/",
        .query = "Param-3=Value3&Param=Value2&%E1%88%B4=Value1",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3\nhost:example.amazonaws.com\nx-amz-"
                "date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n868294f5c38bd141c4972a373a76654f1418a8e4fc18b2e7903ae45e8ae0ec71",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
    },
    {
        .name = "get-vanilla-query-order-key-case",
        .method = "GET",
        .path = "/",
        .query = "Param2=value2&Param1=value1",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:"
                "20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    },
    {
        .name = "get-vanilla-query-unreserved",
        .method = "GET",
        .path = "/",
        .query = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~"
                 "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~"
                "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nhost:example."
                "amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nc30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
    },
    {
        .name = "get-vanilla-query",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "get-vanilla-utf8-query",
        .method = "GET",
        .path = "/",
        .query = "\xe1"
                 "\x88"
                 "\xb4"
                 "=bar",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n%E1%88%B4=bar\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;"
                "x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\neb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
    },
    {
        .name = "get-vanilla-with-session-token",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"X-Amz-Security-Token",
                  "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 3,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq =
            "GET\n/"
            "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:"
            "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n\nhost;x-amz-date;x-"
            "amz-security-token\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date;x-amz-security-token, "
                 "Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
    },
    {
        .name = "get-vanilla",
        .method = "GET",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "GET\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    },
    {
        .name = "post-header-key-case",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    },
    {
        .name = "post-header-key-sort",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", "value1"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 3,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:"
                "20150830T123600Z\n\nhost;my-header1;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;x-amz-date, "
                 "Signature=c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
    },
    {
        .name = "post-header-value-case",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"My-Header1", "VALUE1"},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 3,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nmy-header1:VALUE1\nx-amz-date:"
                "20150830T123600Z\n\nhost;my-header1;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nd51ced243e649e3de6ef63afbbdcbca03131a21a7103a1583706a64618606a93",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;my-header1;x-amz-date, "
                 "Signature=cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
    },
    {
        .name = "post-sts-header-after",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    },
    {
        .name = "post-sts-header-before",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"},
                 {"X-Amz-Security-Token",
                  "AQoDYXdzEPT//////////"
                  "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqT"
                  "flfKD8YUuwthAx7mSEI/qkPpKPi/"
                  "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8"
                  "Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
                  "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="},
                 {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 3,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:"
                "AQoDYXdzEPT//////////"
                "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTfl"
                "fKD8YUuwthAx7mSEI/qkPpKPi/"
                "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx"
                "6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
                "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/"
                "oLxBA==\n\nhost;x-amz-date;x-amz-security-"
                "token\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nc237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date;x-amz-security-token, "
                 "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
    },
    {
        .name = "post-vanilla-empty-query-value",
        .method = "POST",
        .path = "/",
        .query = "Param1=value1",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;"
                "x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n9d659678c1756bb3113e2ce898845a0a79dbbc57b740555917687f1b3340fbbd",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
    },
    {
        .name = "post-vanilla-query",
        .method = "POST",
        .path = "/",
        .query = "Param1=value1",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;"
                "x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n9d659678c1756bb3113e2ce898845a0a79dbbc57b740555917687f1b3340fbbd",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
    },
    {
        .name = "post-vanilla",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}},
        .n_hdrs = 2,
        .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .creq = "POST\n/"
                "\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-"
                "date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\n553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=host;x-amz-date, "
                 "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    },
    {
        .name = "post-x-www-form-urlencoded-parameters",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                 {"Host", "example.amazonaws.com"},
                 {"Content-Length", "13"},
                 {"X-Amz-Date", "20150830T123600Z"},
                 {"x-amz-content-sha256",
                  "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"}},
        .n_hdrs = 5,
        .payload_hash = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
        .creq = "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded; "
                "charset=utf-8\nhost:example.amazonaws.com\nx-amz-content-sha256:"
                "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\nx-amz-date:"
                "20150830T123600Z\n\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-"
                "date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\na89f1a5b53e37702ee6363ce1da3ce8f54386f3c8f352ae652153c2982a0bc4d",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, "
                 "Signature=328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422",
    },
    {
        .name = "post-x-www-form-urlencoded",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"Content-Type", "application/x-www-form-urlencoded"},
                 {"Host", "example.amazonaws.com"},
                 {"Content-Length", "13"},
                 {"X-Amz-Date", "20150830T123600Z"},
                 {"x-amz-content-sha256",
                  "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"}},
        .n_hdrs = 5,
        .payload_hash = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
        .creq = "POST\n/\n\ncontent-length:13\ncontent-type:application/"
                "x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-content-sha256:"
                "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\nx-amz-date:"
                "20150830T123600Z\n\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-"
                "date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
        .sts = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/"
               "aws4_request\nb1edd1d03544c25390e32085d55b57acc9a3961bb59415ff86c45c3d89d16cfb",
        .authz = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                 "SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, "
                 "Signature=d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
    },
};

/* The suite's and the JS SDK's credentials, region and service. */
struct t_creds {
    const char *id, *secret, *region, *service;
};
static const struct t_creds t_aws = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                     "us-east-1", "service"};
static const struct t_creds t_js = {"foo", "bar", "us-bar-1", "foo"};

static void
t_input(const struct t_vector *v, const struct t_creds *c, struct dl_sigv4_hdr *hdrs,
        struct dl_sigv4_input *in)
{
    size_t i;

    for (i = 0; i < v->n_hdrs; i++)
        hdrs[i] = (struct dl_sigv4_hdr){gw_str_c(v->hdrs[i].name), gw_str_c(v->hdrs[i].value)};
    *in = (struct dl_sigv4_input){
        .method = gw_str_c(v->method),
        .path = gw_str_c(v->path),
        .query = gw_str_c(v->query),
        .hdrs = hdrs,
        .n_hdrs = v->n_hdrs,
        .payload_hash = gw_str_c(v->payload_hash),
        .region = gw_str_c(c->region),
        .service = gw_str_c(c->service),
        .access_key_id = gw_str_c(c->id),
        .secret_access_key = gw_str_c(c->secret),
    };
    for (i = 0; i < v->n_hdrs; i++)
        if (gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("x-amz-date")))
            in->amz_date = hdrs[i].value;
}

/* Back to the one-byte prefix. */
static void
t_cut(struct gw_buf *b)
{
    b->len = 1;
    b->data[1] = '\0';
}

/* The three texts of <v>, each appended after a prefix that must survive. */
static void
t_check(const struct t_vector *v, const struct t_creds *c)
{
    struct dl_sigv4_hdr hdrs[T_MAX_HDRS];
    struct dl_sigv4_input in;
    struct gw_buf b = {0};

    t_input(v, c, hdrs, &in);
    assert_int_equal(gw_buf_append_cstr(&b, "<"), GW_OK);
    if (v->creq) {
        assert_int_equal(dl_sigv4_canonical_request(&in, &b), GW_OK);
        if (strcmp(b.data + 1, v->creq) != 0)
            fail_msg("%s: canonical request\n%s\nwanted\n%s", v->name, b.data + 1, v->creq);
        t_cut(&b);
    }
    if (v->sts) {
        assert_int_equal(dl_sigv4_string_to_sign(&in, &b), GW_OK);
        if (strcmp(b.data + 1, v->sts) != 0)
            fail_msg("%s: string to sign\n%s\nwanted\n%s", v->name, b.data + 1, v->sts);
        t_cut(&b);
    }
    assert_int_equal(dl_sigv4_authorization(&in, &b), GW_OK);
    if (strcmp(b.data + 1, v->authz) != 0)
        fail_msg("%s: authorization\n%s\nwanted\n%s", v->name, b.data + 1, v->authz);
    assert_int_equal(b.data[0], '<');
    gw_buf_fini(&b);
}

static void
test_sigv4_aws_test_suite(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof t_suite / sizeof t_suite[0]; i++)
        t_check(&t_suite[i], &t_aws);
}

/* The suite once more with the digest dl_sigv4_init fetches (the test above ran before
 * it: EVP_sha256()) and the signing key from a cache (one secret, date, region and
 * service for all: derived by the first vector, kept for the others). */
static void
test_sigv4_aws_test_suite_with_kept_key(void **state)
{
    static struct dl_sigv4_cache cache;
    size_t i;

    (void)state;
    dl_sigv4_init();
    for (i = 0; i < sizeof t_suite / sizeof t_suite[0]; i++) {
        struct dl_sigv4_hdr hdrs[T_MAX_HDRS];
        struct dl_sigv4_input in;
        struct gw_buf b = {0};

        t_input(&t_suite[i], &t_aws, hdrs, &in);
        in.signing_key = dl_sigv4_cache_key(&cache, &in, &b);
        assert_non_null(in.signing_key);
        in.secret_access_key = GW_STR_LIT("not used when a key is given");
        assert_int_equal(dl_sigv4_authorization(&in, &b), GW_OK);
        if (strcmp(b.data, t_suite[i].authz) != 0)
            fail_msg("%s: authorization\n%s\nwanted\n%s", t_suite[i].name, b.data,
                     t_suite[i].authz);
        gw_buf_fini(&b);
    }
    assert_int_equal(cache.e[1].secret_len, 0); /* one entry served them all */
    dl_sigv4_cache_wipe(&cache);
}

/* The kept key is the derived one of the request's own day, secret, region and
 * service: each of them changed gets another entry, and the oldest entry goes when the
 * cache is full. */
static void
test_sigv4_cache_keys_by_day_secret_region_service(void **state)
{
    static struct dl_sigv4_cache cache;
    struct dl_sigv4_input in = {
        .amz_date = GW_STR_LIT("20261201T235959Z"),
        .region = GW_STR_LIT("us-east-1"),
        .service = GW_STR_LIT("bedrock"),
        .secret_access_key = GW_STR_LIT("secret-one"),
    };
    struct dl_sigv4_input v[5];
    unsigned char want[DL_SIGV4_KEY_LEN];
    const unsigned char *got;
    struct gw_buf b = {0};
    int i;

    (void)state;
    for (i = 0; i < 5; i++)
        v[i] = in;
    v[1].amz_date = GW_STR_LIT("20261202T000000Z"); /* the next UTC day */
    v[2].secret_access_key = GW_STR_LIT("secret-two");
    v[3].region = GW_STR_LIT("eu-west-1");
    v[4].service = GW_STR_LIT("s3");
    for (int round = 0; round < 2; round++) {
        for (i = 0; i < 4; i++) { /* four entries: all kept, found again in round 2 */
            got = dl_sigv4_cache_key(&cache, &v[i], &b);
            assert_non_null(got);
            assert_int_equal(dl_sigv4_signing_key(&v[i], &b, want), GW_OK);
            assert_memory_equal(got, want, sizeof want);
            assert_ptr_equal(got, cache.e[i].key);
        }
    }
    got = dl_sigv4_cache_key(&cache, &v[4], &b); /* a fifth: replaces the first */
    assert_int_equal(dl_sigv4_signing_key(&v[4], &b, want), GW_OK);
    assert_memory_equal(got, want, sizeof want);
    assert_ptr_equal(got, cache.e[0].key);
    assert_int_equal(memcmp(cache.e[0].day, "20261201", 8), 0);
    got = dl_sigv4_cache_key(&cache, &v[0], &b); /* derived again, into the next entry */
    assert_int_equal(dl_sigv4_signing_key(&v[0], &b, want), GW_OK);
    assert_memory_equal(got, want, sizeof want);
    assert_ptr_equal(got, cache.e[1].key);
    /* A secret too long to keep is signed without the cache. */
    v[0].secret_access_key = (struct gw_str){"x", DL_SIGV4_CACHE_SECRET_MAX + 1};
    assert_null(dl_sigv4_cache_key(&cache, &v[0], &b));
    dl_sigv4_cache_wipe(&cache);
    for (size_t k = 0; k < sizeof cache; k++)
        assert_int_equal(((const unsigned char *)&cache)[k], 0);
    gw_buf_fini(&b);
}

#define T_EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define T_JS_HDRS                                                                                  \
    {                                                                                              \
        {"host", "foo.us-bar-1.amazonaws.com"}, {"x-amz-content-sha256", T_EMPTY_SHA},             \
        {                                                                                          \
            "x-amz-date", "20000101T000000Z"                                                       \
        }                                                                                          \
    }
#define T_JS_AUTHZ(sig)                                                                            \
    "AWS4-HMAC-SHA256 Credential=foo/20000101/us-bar-1/foo/aws4_request, "                         \
    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" sig

/* aws-sdk-js-v3 packages/signature-v4/src/SignatureV4.spec.ts, "URI encoding paths":
 * the path "/foo%3Dbar" signs as "/foo%253Dbar" (a second encoding; the S3 signer,
 * which skips it, gets another signature), and the spellings "/abc/../foo%3Dbar" and
 * "//foo%3Dbar" normalize to the same one. */
static void
test_sigv4_js_sdk_encodes_the_path_twice(void **state)
{
    static const char *paths[] = {"/foo%3Dbar", "/abc/../foo%3Dbar", "//foo%3Dbar"};
    size_t i;

    (void)state;
    for (i = 0; i < 3; i++) {
        struct t_vector v = {
            .name = paths[i],
            .method = "POST",
            .path = paths[i],
            .query = "",
            .hdrs = T_JS_HDRS,
            .n_hdrs = 3,
            .payload_hash = T_EMPTY_SHA,
            .creq = "POST\n/foo%253Dbar\n\nhost:foo.us-bar-1.amazonaws.com\n"
                    "x-amz-content-sha256:" T_EMPTY_SHA "\nx-amz-date:20000101T000000Z\n\n"
                    "host;x-amz-content-sha256;x-amz-date\n" T_EMPTY_SHA,
            .authz = T_JS_AUTHZ("fb4948cab44a9c47ce3b1a2489d01ec939fea9e79eccdb4593c11a94f207e075"),
        };

        t_check(&v, &t_js);
    }
}

/* The same spec file's "#sign (request)" cases: no body, a string body (its hash from
 * dl_sigv4_payload_hash) and a session token signed as x-amz-security-token. */
static void
test_sigv4_js_sdk_requests(void **state)
{
    static const char body[] = "It was the best of times, it was the worst of times";
    char hash[DL_SIGV4_HASH_HEX];
    struct t_vector plain = {
        .name = "no body",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = T_JS_HDRS,
        .n_hdrs = 3,
        .payload_hash = T_EMPTY_SHA,
        .authz = T_JS_AUTHZ("1e3b24fcfd7655c0c245d99ba7b6b5ca6174eab903ebfbda09ce457af062ad30"),
    };
    struct t_vector token = {
        .name = "session token",
        .method = "POST",
        .path = "/",
        .query = "",
        .hdrs = {{"host", "foo.us-bar-1.amazonaws.com"},
                 {"x-amz-content-sha256", T_EMPTY_SHA},
                 {"x-amz-date", "20000101T000000Z"},
                 {"x-amz-security-token", "baz"}},
        .n_hdrs = 4,
        .payload_hash = T_EMPTY_SHA,
        .authz = "AWS4-HMAC-SHA256 Credential=foo/20000101/us-bar-1/foo/aws4_request, "
                 "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
                 "Signature=4fd09a8cf3b28a62a9c6c424f03ababcd703528578bc6ec9184fc585f18c3fbb",
    };
    struct t_vector with_body = plain;

    (void)state;
    t_check(&plain, &t_js);
    t_check(&token, &t_js);
    dl_sigv4_payload_hash(body, sizeof body - 1, hash);
    with_body.name = "string body";
    with_body.hdrs[1].value = hash;
    with_body.payload_hash = hash;
    with_body.authz =
        T_JS_AUTHZ("cf22a0befff359388f136b158f0b1b43db7b18d2ca65ce4112bc88a16815c4b6");
    t_check(&with_body, &t_js);
}

/* A Converse path as dl_bedrock_path writes it: the model id's ':' is "%3A" on the
 * wire, "%253A" in the canonical request (aws-sdk-js-v3's getCanonicalPath encodes the
 * already encoded path once more for every service but S3); a '/' of an ARN, "%2F" on
 * the wire, is "%252F", not a separator. */
static void
test_sigv4_bedrock_path_is_encoded_twice(void **state)
{
    struct dl_sigv4_hdr hdrs[] = {
        {GW_STR_LIT("Host"), GW_STR_LIT("bedrock-runtime.us-east-1.amazonaws.com")},
        {GW_STR_LIT("X-Amz-Date"), GW_STR_LIT("20251201T000000Z")},
    };
    struct dl_sigv4_input in = {
        .method = GW_STR_LIT("POST"),
        .path = GW_STR_LIT("/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"),
        .hdrs = hdrs,
        .n_hdrs = 2,
        .payload_hash = GW_STR_LIT(T_EMPTY_SHA),
        .amz_date = GW_STR_LIT("20251201T000000Z"),
        .region = GW_STR_LIT("us-east-1"),
        .service = GW_STR_LIT("bedrock"),
        .access_key_id = GW_STR_LIT("AKIDEXAMPLE"),
        .secret_access_key = GW_STR_LIT("secret"),
    };
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(dl_sigv4_canonical_request(&in, &b), GW_OK);
    assert_string_equal(b.data,
                        "POST\n/model/us.anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse\n"
                        "\nhost:bedrock-runtime.us-east-1.amazonaws.com\n"
                        "x-amz-date:20251201T000000Z\n\nhost;x-amz-date\n" T_EMPTY_SHA);
    gw_buf_reset(&b);
    in.path = GW_STR_LIT("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Afoundation-model"
                         "%2Fx/converse-stream");
    assert_int_equal(dl_sigv4_canonical_request(&in, &b), GW_OK);
    assert_non_null(strstr(b.data, "\n/model/arn%253Aaws%253Abedrock%253Aus-east-1%253A1%253A"
                                   "foundation-model%252Fx/converse-stream\n"));
    gw_buf_fini(&b);
}

/* Query parts are decoded before they are encoded: a '%' without two hex digits is a
 * literal '%' (%25), '+' is a '+' (%2B), a parameter without '=' has an empty value,
 * empty parameters go; the sort is by encoded name, then value. */
static void
test_sigv4_query_edge_cases(void **state)
{
    struct dl_sigv4_hdr hdrs[] = {{GW_STR_LIT("host"), GW_STR_LIT("h")}};
    struct dl_sigv4_input in = {
        .method = GW_STR_LIT("GET"),
        .path = GW_STR_LIT(""),
        .query = GW_STR_LIT("b=%2&&a=x+y&a=%41&c&%7e=1"),
        .hdrs = hdrs,
        .n_hdrs = 1,
        .payload_hash = GW_STR_LIT(T_EMPTY_SHA),
        .amz_date = GW_STR_LIT("20150830T123600Z"),
    };
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(dl_sigv4_canonical_request(&in, &b), GW_OK);
    assert_string_equal(b.data, "GET\n/\na=A&a=x%2By&b=%252&c=&~=1\nhost:h\n\nhost\n" T_EMPTY_SHA);
    gw_buf_fini(&b);
}

static void
test_sigv4_date_and_payload_hash(void **state)
{
    char d[DL_SIGV4_DATE_LEN + 1], h[DL_SIGV4_HASH_HEX];

    (void)state;
    dl_sigv4_amz_date(1440938160, d); /* the suite's 2015-08-30T12:36:00Z */
    assert_string_equal(d, "20150830T123600Z");
    dl_sigv4_amz_date(946684800, d);
    assert_string_equal(d, "20000101T000000Z");
    dl_sigv4_amz_date(1709251199, d); /* a leap year's Feb 29, last second */
    assert_string_equal(d, "20240229T235959Z");
    dl_sigv4_payload_hash("", 0, h);
    assert_string_equal(h, T_EMPTY_SHA);
    dl_sigv4_payload_hash("Param1=value1", 13, h); /* post-x-www-form-urlencoded's */
    assert_string_equal(h, "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
}

/* No host header, or a date that is not 16 characters: refused, <out> unchanged. */
static void
test_sigv4_unusable_input_is_refused(void **state)
{
    struct dl_sigv4_hdr hdrs[] = {{GW_STR_LIT("x-amz-date"), GW_STR_LIT("20150830T123600Z")},
                                  {GW_STR_LIT("hostx"), GW_STR_LIT("h")}};
    struct dl_sigv4_input in = {
        .method = GW_STR_LIT("GET"),
        .path = GW_STR_LIT("/"),
        .hdrs = hdrs,
        .n_hdrs = 2,
        .payload_hash = GW_STR_LIT(T_EMPTY_SHA),
        .amz_date = GW_STR_LIT("20150830T123600Z"),
        .region = GW_STR_LIT("us-east-1"),
        .service = GW_STR_LIT("service"),
        .access_key_id = GW_STR_LIT("AKIDEXAMPLE"),
        .secret_access_key = GW_STR_LIT("s"),
    };
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&b, "keep"), GW_OK);
    assert_int_equal(dl_sigv4_canonical_request(&in, &b), GW_E_BAD_REQUEST);
    assert_int_equal(dl_sigv4_authorization(&in, &b), GW_E_BAD_REQUEST);
    hdrs[1].name = GW_STR_LIT("HOST");
    in.amz_date = GW_STR_LIT("20150830T1236Z");
    assert_int_equal(dl_sigv4_string_to_sign(&in, &b), GW_E_BAD_REQUEST);
    assert_string_equal(b.data, "keep");
    in.amz_date = GW_STR_LIT("20150830T123600Z");
    assert_int_equal(dl_sigv4_authorization(&in, &b), GW_OK);
    gw_buf_fini(&b);
}

/* Out of memory at any step: GW_E_NOMEM, <out> as it was. */
static void
test_sigv4_out_of_memory(void **state)
{
    const struct t_vector *v = &t_suite[0];
    struct dl_sigv4_hdr hdrs[T_MAX_HDRS];
    struct dl_sigv4_input in;
    struct gw_buf b = {0};

    (void)state;
    t_input(v, &t_aws, hdrs, &in);
    gw_alloc_fail_at(1);
    assert_int_equal(dl_sigv4_authorization(&in, &b), GW_E_NOMEM);
    gw_alloc_fail_at(0);
    assert_int_equal(b.len, 0);
    gw_buf_fini(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigv4_aws_test_suite),
        cmocka_unit_test(test_sigv4_aws_test_suite_with_kept_key),
        cmocka_unit_test(test_sigv4_cache_keys_by_day_secret_region_service),
        cmocka_unit_test(test_sigv4_js_sdk_encodes_the_path_twice),
        cmocka_unit_test(test_sigv4_js_sdk_requests),
        cmocka_unit_test(test_sigv4_bedrock_path_is_encoded_twice),
        cmocka_unit_test(test_sigv4_query_edge_cases),
        cmocka_unit_test(test_sigv4_date_and_payload_hash),
        cmocka_unit_test(test_sigv4_unusable_input_is_refused),
        cmocka_unit_test(test_sigv4_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
