// The system's libuv, for the raw-libuv peer rows of the loop benchmarks, and the C floor of a
// cross-thread queue into a libuv loop.
#include <pthread.h>
#include <stdlib.h>
#include <uv.h>

// The floor of `EventLoop.execute`: tasks (a function and its argument, no allocation) queued
// under a mutex by any thread, and one `uv_async_send` when the queue was empty; the loop
// thread swaps the queue for an empty one and runs the batch. The mutex spins a little before
// sleeping, as the event loop's does.
typedef struct {
    void (*function)(void *);
    void *argument;
} rl_c_task;

typedef struct {
    pthread_mutex_t lock;
    rl_c_task *pending;
    size_t pending_count, pending_capacity;
    rl_c_task *draining;
    size_t draining_capacity;
    uv_async_t wakeup;
} rl_c_queue;

static inline void rl_c_queue_drain(uv_async_t *handle) {
    rl_c_queue *queue = (rl_c_queue *)handle->data;
    pthread_mutex_lock(&queue->lock);
    rl_c_task *batch = queue->pending;
    size_t count = queue->pending_count, capacity = queue->pending_capacity;
    queue->pending = queue->draining;
    queue->pending_capacity = queue->draining_capacity;
    queue->pending_count = 0;
    pthread_mutex_unlock(&queue->lock);
    for (size_t index = 0; index < count; index++) batch[index].function(batch[index].argument);
    queue->draining = batch;
    queue->draining_capacity = capacity;
}

// Initializes `queue` on `loop`; call from the loop's thread before it runs. 0 or a libuv error.
static inline int rl_c_queue_init(rl_c_queue *queue, uv_loop_t *loop) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&queue->lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
    queue->pending = NULL;
    queue->pending_count = queue->pending_capacity = 0;
    queue->draining = NULL;
    queue->draining_capacity = 0;
    queue->wakeup.data = queue;
    return uv_async_init(loop, &queue->wakeup, rl_c_queue_drain);
}

// Queues a task from any thread; 0, or -1 if memory ran out.
static inline int rl_c_queue_push(rl_c_queue *queue, void (*function)(void *), void *argument) {
    pthread_mutex_lock(&queue->lock);
    if (queue->pending_count == queue->pending_capacity) {
        size_t capacity = queue->pending_capacity ? queue->pending_capacity * 2 : 1024;
        rl_c_task *grown = (rl_c_task *)realloc(queue->pending, capacity * sizeof(rl_c_task));
        if (!grown) {
            pthread_mutex_unlock(&queue->lock);
            return -1;
        }
        queue->pending = grown;
        queue->pending_capacity = capacity;
    }
    queue->pending[queue->pending_count++] = (rl_c_task){function, argument};
    int was_empty = queue->pending_count == 1;
    pthread_mutex_unlock(&queue->lock);
    if (was_empty) uv_async_send(&queue->wakeup);
    return 0;
}
