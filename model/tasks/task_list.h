/* task_list.h — the registry of built-in tasks: one line per task, in the
 * order --help and error messages list them. A task is one file defining
 * `const ws_task_kind ws_task_kind_<name>` (task_impl.h) plus its line here. */
WS_TASK(recall)
WS_TASK(facts)
WS_TASK(conj)
WS_TASK(life)
WS_TASK(numbers)
WS_TASK(memory)
