/* Core worker threads: see core/worker.h. */
#include "core/worker.h"

#include <stddef.h>

#include "rt/log.h"

struct core_workers core_query_workers = CORE_WORKERS_INIT("core_query", 2);

static void work_done(struct rt_defer *d)
{
        struct core_work *w = (struct core_work *)((char *)d - offsetof(struct core_work, defer_));
        w->done(w);
}

static void defer_done(struct core_work *w)
{
        w->defer_.fn = work_done;
        w->defer_.next = NULL;
}

static void *worker_main(void *arg)
{
        struct core_workers *p = arg;
        for (;;) {
                pthread_mutex_lock(&p->lock);
                while (!p->head)
                        pthread_cond_wait(&p->cond, &p->lock);
                struct core_work *w = p->head;
                p->head = w->next_;
                if (!p->head)
                        p->tail = NULL;
                pthread_mutex_unlock(&p->lock);
                w->run(w);
                defer_done(w);
                rt_defer_remote(w->reactor, &w->defer_);
        }
        return NULL;
}

bool core_workers_ready(struct core_workers *p)
{
        pthread_mutex_lock(&p->lock);
        if (!p->started) {
                p->started = true;
                for (unsigned i = 0; i < p->want; i++) {
                        pthread_t t;
                        pthread_attr_t a;
                        pthread_attr_init(&a);
                        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                        if (pthread_create(&t, &a, worker_main, p) == 0) {
                                pthread_setname_np(t, p->name);
                                p->n++;
                        }
                        pthread_attr_destroy(&a);
                }
                if (!p->n)
                        LOG_WARN("core",
                                 "no %s worker thread could start: its work runs on the "
                                 "reactor",
                                 p->name);
        }
        bool ok = p->n > 0;
        pthread_mutex_unlock(&p->lock);
        return ok;
}

bool core_work_submit(struct core_workers *p, struct core_work *w)
{
        if (!core_workers_ready(p))
                return false;
        w->next_ = NULL;
        pthread_mutex_lock(&p->lock);
        if (p->tail)
                p->tail->next_ = w;
        else
                p->head = w;
        p->tail = w;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
        return true;
}

void core_work_inline(struct core_work *w)
{
        w->run(w);
        defer_done(w);
        rt_defer(w->reactor, &w->defer_);
}
