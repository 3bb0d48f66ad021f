/* encode.c — typed results back to JSON for --json output (the API's field
 * names, so scripts read the same shapes as from the REST API). */
#include "cli.h"

cJSON *cli_json_num(cJSON *o, const char *name, double value)
{
    if (o && !cJSON_AddNumberToObject(o, name, value)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *cli_json_str(cJSON *o, const char *name, const char *value)
{
    if (o && !cJSON_AddStringToObject(o, name, value)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *cli_json_item(cJSON *o, const char *name, cJSON *value)
{
    if (!o || !value || !cJSON_AddItemToObject(o, name, value)) {
        cJSON_Delete(value);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *cli_session_json(const ws_client_session *s, int listing)
{
    cJSON *o = cli_json_str(cJSON_CreateObject(), "id", s->id);
    o = cli_json_num(o, "step", (double)s->step);
    o = cli_json_num(o, "updated_ms", (double)s->updated_ms);
    if (listing) return o;
    o = cli_json_str(o, "model", s->model);
    o = cli_json_num(o, "state_version", (double)s->state_version);
    o = cli_json_item(o, "state_shape",
                      cJSON_CreateIntArray((const int[]){s->state_rows, s->state_cols}, 2));
    return cli_json_num(o, "created_ms", (double)s->created_ms);
}

cJSON *cli_training_json(const ws_client_training *t)
{
    cJSON *o = cli_json_item(cJSON_CreateObject(), "enabled", cJSON_CreateBool(t->enabled));
    o = cli_json_num(o, "lr", t->lr);
    o = cli_json_num(o, "update_every", t->update_every);
    o = cli_json_num(o, "recall_queries", t->recall_queries);
    if (t->self_supervised < 0) return o; /* an older server */
    o = cli_json_item(o, "self_supervised", cJSON_CreateBool(t->self_supervised));
    o = cli_json_num(o, "negative_queries", t->negative_queries);
    o = cli_json_num(o, "holdout", t->holdout);
    o = cli_json_item(o, "gate", cJSON_CreateBool(t->gate));
    o = cli_json_num(o, "gate_tolerance", t->gate_tolerance);
    if (t->rehearsal < 0) return o; /* an older server */
    o = cli_json_num(o, "rehearsal", t->rehearsal);
    if (t->publish_every > 0) o = cli_json_num(o, "publish_every", t->publish_every);
    if (!t->scope[0]) return o; /* an older server */
    o = cli_json_item(o, "scope", cJSON_CreateString(t->scope));
    return t->rules < 0 ? o : cli_json_item(o, "rules", cJSON_CreateBool(t->rules));
}

static cJSON *status_json(const ws_client_model_status *st)
{
    cJSON *o = cli_json_str(cJSON_CreateObject(), "state", st->state);
    o = cli_json_num(o, "serving_version", (double)st->serving_version);
    o = cli_json_num(o, "examples_ready", (double)st->examples_ready);
    o = cli_json_num(o, "examples_labelled", (double)st->examples_labelled);
    o = cli_json_num(o, "examples_self_supervised", (double)st->examples_self_supervised);
    o = cli_json_num(o, "examples_held_out", (double)st->examples_held_out);
    o = cli_json_num(o, "examples_trained", (double)st->examples_trained);
    o = cli_json_num(o, "examples_dropped", (double)st->examples_dropped);
    o = cli_json_num(o, "updates", (double)st->updates);
    return cli_json_num(o, "last_loss", st->last_loss);
}

static cJSON *gate_json(const ws_client_model_gate *g)
{
    cJSON *o = cli_json_num(cJSON_CreateObject(), "published", (double)g->published);
    o = cli_json_num(o, "rejected", (double)g->rejected);
    o = cli_json_num(o, "restored", (double)g->restored);
    o = cli_json_num(o, "anchor_version", (double)g->anchor_version);
    cJSON *last = NULL;
    if (g->last_verdict[0]) {
        last = cli_json_str(cJSON_CreateObject(), "verdict", g->last_verdict);
        last = cli_json_str(last, "reason", g->last_reason);
    }
    o = cli_json_item(o, "last", last ? last : cJSON_CreateNull());
    return cli_json_item(o, "served_probe_accuracy",
                         g->served_probe_accuracy >= 0
                             ? cJSON_CreateNumber(g->served_probe_accuracy)
                             : cJSON_CreateNull());
}

cJSON *cli_model_json(const ws_client_model *m)
{
    cJSON *o = cli_json_str(cJSON_CreateObject(), "name", m->name);
    o = cli_json_num(o, "version", (double)m->version);
    o = cli_json_item(o, "config", cJSON_Parse(m->config_json ? m->config_json : "{}"));
    o = cli_json_item(o, "training", cli_training_json(&m->training));
    o = cli_json_num(o, "created_ms", (double)m->created_ms);
    if (m->origin[0]) o = cli_json_str(o, "origin", m->origin);
    if (m->version_note) o = cli_json_str(o, "version_note", m->version_note);
    o = cli_json_item(o, "tenant",
                      m->tenant[0] ? cJSON_CreateString(m->tenant) : cJSON_CreateNull());
    if (m->gate.present) o = cli_json_item(o, "gate", gate_json(&m->gate));
    if (m->rules_holding[0]) o = cli_json_str(o, "rules_holding", m->rules_holding);
    return m->status.present ? cli_json_item(o, "status", status_json(&m->status)) : o;
}
