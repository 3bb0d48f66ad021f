/* test_server_http.c — the HTTP surface around the routes, on a real daemon:
 * HEAD on every GET row of the route table (the GET's status and headers, no
 * body), OPTIONS on every path (204 with Allow, no key needed), CORS for the
 * origins of --cors-origin (preflights, the headers on answers and errors,
 * nothing for other origins, nothing at all by default), /metrics parsed as
 * the Prometheus text format (HELP and TYPE for every family, histograms
 * whole, process metrics, per-route latency), and DELETE /v1/models/{name}
 * taking the model's files and series with it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/daemon/routes.h"
#include "test_server_util.h"
#include "test_util.h"

#define D ws_ts_shared
#define ORIGIN_A "https://app.example.com"
#define ORIGIN_B "http://b.test:3000"

typedef struct {
    const char *method, *pattern;
} row;
#define ROW(method, pattern, handler, auth, name, body) {#method, pattern},
static const row rows[] = {WS_ROUTES(ROW)};
#undef ROW
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static char sid[40]; /* a session with one step */

static int setup(void **state)
{
    (void)state;
    ws_ts_tmpdir(ws_ts_shared_dir, sizeof ws_ts_shared_dir);
    const char *flags[] = {"--cors-origin", ORIGIN_A, "--cors-origin", "http://a.test, " ORIGIN_B,
                           NULL};
    if (ws_ts_start(&D, ws_ts_shared_dir, flags) != 0) return -1;
    ws_ts_resp r;
    char p[128];
    if (ws_ts_session(&D, NULL, "default", sid) != 201) return -1;
    long st = ws_ts_req(&D, "POST", ws_ts_spath(p, sizeof p, sid, "/steps"), NULL,
                        "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}],"
                        "\"queries\":[{\"fact\":[\"a\",\"b\"]}],\"labels\":[true]}",
                        &r);
    ws_ts_resp_free(&r);
    return st == 200 ? 0 : -1;
}

/* A row's pattern with its {…} segments filled in: the session, "default",
 * step 1, version 1. */
static void concrete(const char *pattern, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < cap;) {
        if (*p != '{') {
            out[n++] = *p++;
            continue;
        }
        size_t len = strcspn(p, "}");
        const char *v = !strncmp(p, "{id}", 4) ? sid : !strncmp(p, "{name}", 6) ? "default" : "1";
        n += (size_t)snprintf(out + n, cap - n, "%s", v);
        p += len + 1;
    }
    out[n < cap ? n : cap - 1] = '\0';
}

static void test_head_every_get(void **state)
{
    (void)state;
    int n_get = 0;
    for (int i = 0; i < N_ROWS; i++) {
        if (strcmp(rows[i].method, "GET") != 0) continue;
        n_get++;
        char path[256], type_get[128] = "", type_head[128] = "", cl[32] = "";
        concrete(rows[i].pattern, path, sizeof path);
        ws_ts_resp g, h;
        long sg = ws_ts_http(&D, "GET", path, NULL, NULL, 0, &g);
        long sh = ws_ts_http(&D, "HEAD", path, NULL, NULL, 0, &h);
        if (sg != 200 || sh != 200) print_message("%s: GET %ld, HEAD %ld\n", path, sg, sh);
        assert_int_equal(sg, 200);
        assert_int_equal(sh, 200);
        assert_int_equal(h.len, 0);
        assert_true(ws_ts_header(&g, "Content-Type", type_get, sizeof type_get));
        assert_true(ws_ts_header(&h, "Content-Type", type_head, sizeof type_head));
        assert_string_equal(type_get, type_head);
        assert_true(ws_ts_header(&h, "Content-Length", cl, sizeof cl));
        /* /metrics changes between two scrapes (the GET itself is counted) */
        if (strcmp(rows[i].pattern, "/metrics") != 0) assert_int_equal(strtoul(cl, NULL, 10), g.len);
        ws_ts_resp_free(&g);
        ws_ts_resp_free(&h);
    }
    assert_true(n_get >= 10);
}

/* The Allow header the table implies for a pattern: its rows' methods in table
 * order, HEAD after GET, OPTIONS last (routes.c). */
static void allow_of(const char *pattern, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < N_ROWS; i++) {
        if (strcmp(rows[i].pattern, pattern) != 0) continue;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s%s", n ? ", " : "", rows[i].method,
                 strcmp(rows[i].method, "GET") ? "" : ", HEAD");
    }
    size_t n = strlen(out);
    snprintf(out + n, cap - n, ", OPTIONS");
}

static void test_options_every_path(void **state)
{
    (void)state;
    for (int i = 0; i < N_ROWS; i++) {
        char path[256], allow[128], want[128];
        concrete(rows[i].pattern, path, sizeof path);
        allow_of(rows[i].pattern, want, sizeof want);
        ws_ts_resp r;
        assert_int_equal(ws_ts_http(&D, "OPTIONS", path, NULL, NULL, 0, &r), 204);
        assert_int_equal(r.len, 0);
        assert_true(ws_ts_header(&r, "Allow", allow, sizeof allow));
        assert_string_equal(allow, want);
        /* no Origin: no CORS headers, whatever --cors-origin says */
        assert_false(ws_ts_header(&r, "Access-Control-Allow-Origin", allow, sizeof allow));
        ws_ts_resp_free(&r);
        /* and 405 names the same methods */
        if (strcmp(rows[i].method, "GET") != 0) continue;
        assert_int_equal(ws_ts_http(&D, "TRACE", path, NULL, NULL, 0, &r), 405);
        assert_true(ws_ts_header(&r, "Allow", allow, sizeof allow));
        assert_string_equal(allow, want);
        ws_ts_resp_free(&r);
    }
}

static void test_cors(void **state)
{
    (void)state;
    char v[256], p[128];
    ws_ts_resp r;
    /* a preflight from an allowed origin */
    const char *pre[] = {"Origin: " ORIGIN_A, "Access-Control-Request-Method: POST",
                         "Access-Control-Request-Headers: authorization, content-type", NULL};
    ws_ts_spath(p, sizeof p, sid, "/steps");
    assert_int_equal(ws_ts_http_headers(&D, "OPTIONS", p, NULL, pre, NULL, 0, &r), 204);
    assert_true(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_string_equal(v, ORIGIN_A);
    assert_true(ws_ts_header(&r, "Access-Control-Allow-Methods", v, sizeof v));
    assert_string_equal(v, "GET, HEAD, POST, OPTIONS");
    assert_true(ws_ts_header(&r, "Access-Control-Allow-Headers", v, sizeof v));
    assert_non_null(strstr(v, "Authorization"));
    assert_non_null(strstr(v, "Content-Type"));
    assert_true(ws_ts_header(&r, "Access-Control-Max-Age", v, sizeof v));
    assert_true(ws_ts_header(&r, "Vary", v, sizeof v));
    assert_string_equal(v, "Origin");
    ws_ts_resp_free(&r);
    /* answers and errors to an origin of the comma list carry its origin */
    const char *b[] = {"Origin: " ORIGIN_B, NULL};
    assert_int_equal(ws_ts_http_headers(&D, "GET", ws_ts_spath(p, sizeof p, sid, "/state"), NULL, b,
                                        NULL, 0, &r),
                     200);
    assert_true(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_string_equal(v, ORIGIN_B);
    assert_true(ws_ts_header(&r, "Access-Control-Expose-Headers", v, sizeof v));
    assert_non_null(strstr(v, "X-State-Shape"));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http_headers(&D, "GET", "/v1/models/nope", NULL, b, NULL, 0, &r), 404);
    assert_true(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    ws_ts_resp_free(&r);
    /* another origin: no grant, neither on a preflight nor on an answer */
    const char *evil[] = {"Origin: https://evil.example", "Access-Control-Request-Method: DELETE",
                          NULL};
    assert_int_equal(ws_ts_http_headers(&D, "OPTIONS", "/v1/sessions", NULL, evil, NULL, 0, &r), 204);
    assert_false(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_false(ws_ts_header(&r, "Access-Control-Allow-Methods", v, sizeof v));
    assert_true(ws_ts_header(&r, "Vary", v, sizeof v));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http_headers(&D, "GET", "/healthz", NULL, evil, NULL, 0, &r), 200);
    assert_false(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    ws_ts_resp_free(&r);
}

/* Without --cors-origin no answer carries a CORS header; a bad origin is
 * refused at start. */
static void test_cors_off_by_default(void **state)
{
    (void)state;
    char dir[256], v[128], out[1024];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    const char *pre[] = {"Origin: " ORIGIN_A, "Access-Control-Request-Method: GET", NULL};
    ws_ts_resp r;
    assert_int_equal(ws_ts_http_headers(&d, "OPTIONS", "/v1/models", NULL, pre, NULL, 0, &r), 204);
    assert_false(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_false(ws_ts_header(&r, "Vary", v, sizeof v));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http_headers(&d, "GET", "/v1/models", NULL, pre, NULL, 0, &r), 200);
    assert_false(ws_ts_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
    static const char *const bad[] = {"--cors-origin https://a.example/app --help",
                                      "--cors-origin app.example.com --help",
                                      "--cors-origin https://a.example,, --help"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ws_test_run_prog("WS_DAEMON", bad[i], 1, out, sizeof out), 2);
        assert_non_null(strstr(out, "--cors-origin"));
    }
}

/* ---- the Prometheus text format (0.0.4) ----------------------------------- */

typedef struct {
    char name[128], type[16];
    int help, typed, samples;
} family;

typedef struct {
    family fam[128];
    int n;
    char err[512];
} exposition;

static int parse_fail(exposition *x, int line, const char *why, const char *text)
{
    snprintf(x->err, sizeof x->err, "line %d: %s: %.200s", line, why, text);
    return 0;
}

static family *fam_find(exposition *x, const char *name, size_t len)
{
    for (int i = 0; i < x->n; i++)
        if (strlen(x->fam[i].name) == len && !strncmp(x->fam[i].name, name, len)) return &x->fam[i];
    return NULL;
}

/* The family of that name, made when it is new (NULL: no room). */
static family *fam_get(exposition *x, const char *name, size_t len)
{
    family *f = fam_find(x, name, len);
    if (f) return f;
    if (x->n == 128 || len >= sizeof x->fam[0].name) return NULL;
    f = &x->fam[x->n++];
    memset(f, 0, sizeof *f);
    memcpy(f->name, name, len);
    return f;
}

static size_t name_len(const char *s)
{
    size_t n = 0;
    if (!isalpha((unsigned char)s[0]) && s[0] != '_' && s[0] != ':') return 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':') n++;
    return n;
}

/* The family a sample belongs to (a histogram's _bucket, _sum and _count go
 * to it); NULL when no HELP or TYPE named it. */
static family *sample_family(exposition *x, const char *name, size_t len)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        size_t sl = strlen(suffixes[i]);
        if (len <= sl || strncmp(name + len - sl, suffixes[i], sl) != 0) continue;
        family *f = fam_find(x, name, len - sl);
        if (f && !strcmp(f->type, "histogram")) return f;
    }
    return fam_find(x, name, len);
}

/* {a="b",c="d"}: 1 when well formed, its end into *end. */
static int labels_ok(const char *s, const char **end)
{
    if (*s != '{') {
        *end = s;
        return 1;
    }
    s++;
    while (*s != '}') {
        size_t n = name_len(s);
        if (!n || s[n] != '=' || s[n + 1] != '"') return 0;
        s += n + 2;
        while (*s && *s != '"') s += (*s == '\\' && s[1]) ? 2 : 1;
        if (*s != '"') return 0;
        s++;
        if (*s == ',') s++;
        else if (*s != '}') return 0;
    }
    *end = s + 1;
    return 1;
}

/* Parses the whole text: every line a HELP, a TYPE or a sample of a family
 * already helped and typed (each once), a float value. 1 when all is well,
 * else 0 with x->err. */
static int exposition_parse(const char *text, exposition *x)
{
    memset(x, 0, sizeof *x);
    int line = 0;
    for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
        line++;
        const char *nl = strchr(l, '\n');
        if (!nl) return parse_fail(x, line, "no final newline", l);
        char buf[1024];
        size_t ll = (size_t)(nl - l);
        if (ll >= sizeof buf) return parse_fail(x, line, "line too long", l);
        memcpy(buf, l, ll);
        buf[ll] = '\0';
        if (!strncmp(buf, "# HELP ", 7) || !strncmp(buf, "# TYPE ", 7)) {
            const char *name = buf + 7;
            size_t n = name_len(name);
            if (!n || name[n] != ' ' || !name[n + 1]) return parse_fail(x, line, "bad comment", buf);
            family *f = fam_get(x, name, n);
            if (!f) return parse_fail(x, line, "too many families", buf);
            if (f->samples) return parse_fail(x, line, "HELP/TYPE after samples", buf);
            if (buf[2] == 'H') {
                if (f->help++) return parse_fail(x, line, "second HELP", buf);
                continue;
            }
            if (f->typed++) return parse_fail(x, line, "second TYPE", buf);
            static const char *const types[] = {"counter", "gauge", "histogram", "summary",
                                                "untyped"};
            int ok = 0;
            for (int i = 0; i < 5; i++) ok |= !strcmp(name + n + 1, types[i]);
            if (!ok) return parse_fail(x, line, "unknown type", buf);
            snprintf(f->type, sizeof f->type, "%s", name + n + 1);
            if (!strcmp(f->type, "counter") && (n < 6 || strncmp(name + n - 6, "_total", 6)))
                return parse_fail(x, line, "a counter's name must end in _total", buf);
            continue;
        }
        if (buf[0] == '#') continue; /* another comment */
        size_t n = name_len(buf);
        const char *end;
        if (!n || !labels_ok(buf + n, &end) || *end != ' ')
            return parse_fail(x, line, "bad sample", buf);
        char *vend;
        double v = strtod(end + 1, &vend);
        (void)v;
        if (vend == end + 1 || *vend) return parse_fail(x, line, "bad value", buf);
        family *f = sample_family(x, buf, n);
        if (!f || !f->help || !f->typed) return parse_fail(x, line, "sample without HELP and TYPE", buf);
        f->samples++;
    }
    return 1;
}

/* The value of the sample that starts with `head` (name and labels, up to
 * the value's space); NAN when there is none. */
static double sample(const char *text, const char *head)
{
    size_t hl = strlen(head);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, head, hl) && l[hl] == ' ') return strtod(l + hl + 1, NULL);
    return NAN;
}

/* A histogram's series with labels `labels` ("" or `k="v",…,`): at least
 * two buckets, le ascending and ending with +Inf, counts cumulative, +Inf
 * equal to _count, a _sum. */
static void histogram_ok(const char *text, const char *name, const char *labels)
{
    char head[512];
    int n = snprintf(head, sizeof head, "%s_bucket{%sle=\"", name, labels);
    double prev_le = -INFINITY, prev = 0;
    int buckets = 0, inf = 0;
    for (const char *l = strstr(text, head); l; l = strstr(l + 1, head)) {
        if (l != text && l[-1] != '\n') continue;
        const char *le = l + n;
        double bound = !strncmp(le, "+Inf\"", 5) ? INFINITY : strtod(le, NULL);
        double v = strtod(strstr(le, "} ") + 2, NULL);
        assert_true(bound > prev_le);
        assert_true(v >= prev);
        prev_le = bound, prev = v, buckets++, inf = isinf(bound);
    }
    if (buckets < 2 || !inf) print_message("%s{%s}: %d buckets, +Inf %d\n", name, labels, buckets, inf);
    assert_true(buckets >= 2 && inf);
    size_t ll = strlen(labels);
    snprintf(head, sizeof head, "%s_count%s%.*s%s", name, ll ? "{" : "", (int)(ll ? ll - 1 : 0),
             labels, ll ? "}" : "");
    assert_true(sample(text, head) == prev);
    snprintf(head, sizeof head, "%s_sum%s%.*s%s", name, ll ? "{" : "", (int)(ll ? ll - 1 : 0),
             labels, ll ? "}" : "");
    assert_true(sample(text, head) >= 0);
}

static void test_exposition_parser_catches(void **state)
{
    (void)state;
    exposition x;
    assert_true(exposition_parse("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n", &x));
    assert_false(exposition_parse("a_total 1\n", &x)); /* no HELP, no TYPE */
    assert_false(exposition_parse("# TYPE a_total counter\na_total 1\n", &x));
    assert_false(exposition_parse("# HELP a A.\n# TYPE a counter\na 1\n", &x)); /* no _total */
    assert_false(exposition_parse("# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n", &x));
    assert_false(exposition_parse("# HELP a A.\n# TYPE a gauge\na one\n", &x));
    assert_false(exposition_parse("# HELP a A.\n# TYPE a gauge\na 1\n# HELP a again\n", &x));
}

static void test_metrics_exposition(void **state)
{
    (void)state;
    ws_ts_resp r;
    /* some traffic for the per-route histograms: a GET, a HEAD, a 405 */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ws_ts_http(&D, "GET", "/healthz", NULL, NULL, 0, &r), 200);
        ws_ts_resp_free(&r);
    }
    assert_int_equal(ws_ts_http(&D, "HEAD", "/v1/models", NULL, NULL, 0, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http(&D, "PUT", "/v1/models", NULL, NULL, 0, &r), 405);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http(&D, "GET", "/metrics", NULL, NULL, 0, &r), 200);
    exposition x;
    if (!exposition_parse(r.body, &x)) print_message("%s\n", x.err);
    assert_true(exposition_parse(r.body, &x));
    for (int i = 0; i < x.n; i++) { /* every family announced is whole */
        if (!x.fam[i].help || !x.fam[i].typed) print_message("%s: no HELP or TYPE\n", x.fam[i].name);
        assert_true(x.fam[i].help && x.fam[i].typed);
    }
    /* the names dashboards already use stay */
    static const char *const kept[] = {"worldstate_build_info",
                                       "worldstate_http_requests_total",
                                       "worldstate_http_request_seconds",
                                       "worldstate_batch_jobs",
                                       "worldstate_steps_total",
                                       "worldstate_queries_total",
                                       "worldstate_training_updates_total",
                                       "worldstate_queue_depth",
                                       "worldstate_model_version",
                                       "worldstate_http_request_duration_seconds",
                                       "process_resident_memory_bytes",
                                       "process_cpu_seconds_total",
                                       "process_open_fds",
                                       "process_start_time_seconds"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        int found = 0;
        for (int f = 0; f < x.n; f++) found |= !strcmp(x.fam[f].name, kept[i]);
        if (!found) print_message("no family %s\n", kept[i]);
        assert_true(found);
    }
    const char *t = r.body;
    assert_true(sample(t, "process_resident_memory_bytes") > 1e6);
    assert_true(sample(t, "process_open_fds") >= 3);
    assert_true(sample(t, "process_cpu_seconds_total") >= 0);
    double start = sample(t, "process_start_time_seconds"), now = (double)time(NULL);
    assert_true(start > now - 3600 && start <= now + 5);
    histogram_ok(t, "worldstate_http_request_seconds", "");
    histogram_ok(t, "worldstate_batch_jobs", "");
    histogram_ok(t, "worldstate_http_request_duration_seconds", "route=\"/healthz\",method=\"GET\",");
    histogram_ok(t, "worldstate_http_request_duration_seconds", "route=\"/v1/models\",method=\"HEAD\",");
    histogram_ok(t, "worldstate_http_request_duration_seconds", "route=\"/v1/models\",method=\"PUT\",");
    assert_true(sample(t, "worldstate_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\"}") >= 3);
    assert_true(sample(t, "worldstate_model_version{model=\"default\"}") >= 1);
    ws_ts_resp_free(&r);
}

static int model_files(const char *name)
{
    char dir[400], prefix[80];
    snprintf(dir, sizeof dir, "%s/models", ws_ts_shared_dir);
    snprintf(prefix, sizeof prefix, "%s-v", name);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

/* A deleted model leaves no row, file or series; its name is free again. */
static void test_model_delete(void **state)
{
    (void)state;
    const char *small = "{\"name\":\"gone\",\"config\":{\"d\":16,\"n_heads\":2,\"n_state\":4}}";
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "POST", "/v1/models", NULL, small, &r), 201);
    ws_ts_resp_free(&r);
    assert_int_equal(model_files("gone"), 1);
    assert_int_equal(ws_ts_req(&D, "DELETE", "/v1/models/gone", NULL, NULL, &r), 204);
    assert_int_equal(r.len, 0);
    ws_ts_resp_free(&r);
    assert_int_equal(model_files("gone"), 0);
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/gone", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&D, "GET", "/metrics", NULL, NULL, &r), 200);
    assert_null(strstr(r.body, "model=\"gone\""));
    ws_ts_resp_free(&r);
    /* refusals say why and change nothing */
    assert_int_equal(ws_ts_req(&D, "DELETE", "/v1/models/default", NULL, NULL, &r), 409);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "error"), "code")->valuestring,
                        "model_is_default");
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&D, "POST", "/v1/models", NULL, small, &r), 201);
    ws_ts_resp_free(&r);
    char id[40];
    assert_int_equal(ws_ts_session(&D, NULL, "gone", id), 201);
    assert_int_equal(ws_ts_req(&D, "DELETE", "/v1/models/gone", NULL, NULL, &r), 409);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "error"), "code")->valuestring,
                        "model_in_use");
    ws_ts_resp_free(&r);
    assert_int_equal(model_files("gone"), 1);
    char p[128];
    assert_int_equal(ws_ts_req(&D, "GET", ws_ts_spath(p, sizeof p, id, ""), NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_every_get),
        cmocka_unit_test(test_options_every_path),
        cmocka_unit_test(test_cors),
        cmocka_unit_test(test_cors_off_by_default),
        cmocka_unit_test(test_exposition_parser_catches),
        cmocka_unit_test(test_metrics_exposition),
        cmocka_unit_test(test_model_delete),
    };
    return cmocka_run_group_tests(tests, setup, ws_ts_shared_teardown);
}
