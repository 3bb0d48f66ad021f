/* not_a_plugin.c — a shared library without the CUDA plugin's entry points, for
 * test_backend_plugin: ws_backend_cuda_load must refuse it. */
int ws_test_not_a_plugin(void);
int ws_test_not_a_plugin(void) { return 1; }
