#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf_a(int n) { for (int i = 0; i < n; i++) sink += i * 7; }
__attribute__((noinline)) void leaf_b(int n) { for (int i = 0; i < n; i++) sink ^= i * 13; }
__attribute__((noinline)) void middle(int k) { if (k & 1) leaf_a(20000); else leaf_b(30000); leaf_a(5000); }
__attribute__((noinline)) void outer(int rounds) {
  for (int r = 0; r < rounds; r++) { middle(r); if (r % 200 == 0) usleep(3000); }
}
void *worker(void *arg) {
  /* Named by itself before its first sample: named by main, a worker could run
     unnamed for as long as a loaded machine keeps main off the CPU. */
  pthread_setname_np(pthread_self(), arg ? "worker-1" : "worker-0");
  outer(1500);
  return 0;
}
int main(void) {
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, (void *)i);
  outer(1500);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  return 0;
}
