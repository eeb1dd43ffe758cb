/* What librdkafka itself reads without Python: the physical limit behind the Python loops
 * (docs/benchmarks.md). One high-level consumer in a new group reads COUNT records of TOPIC from its
 * start, 500 messages per rd_kafka_consume_batch_queue() call (what confluent-kafka's consume(500)
 * calls), every value's length read; with "sync" it commits the consumer's stored offsets after every
 * batch and waits for it, as the idiomatic Python loop does; with "none" it never commits. Prints
 * records/s from the first record to the last and the process's CPU seconds per record.
 *
 * Built against the librdkafka that the confluent-kafka wheel ships (its header from a librdkafka
 * checkout of the same version; neither is committed here), e.g.:
 *   LIBS=.venv/lib/python3.11/site-packages/confluent_kafka.libs
 *   cc -O2 -I $LIBRDKAFKA_SRC/src bench/rdkafka_read.c $LIBS/librdkafka-*.so.1 \
 *      -Wl,-rpath,$PWD/$LIBS -o rdkafka_read
 *   ./rdkafka_read BOOTSTRAP TOPIC COUNT sync|none [key=value ...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdkafka.h"

static double now(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
        char err[512];
        if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "%s=%s: %s\n", key, value, err);
                exit(2);
        }
}

int main(int argc, char **argv) {
        if (argc < 5) {
                fprintf(stderr, "usage: %s BOOTSTRAP TOPIC COUNT sync|none [key=value ...]\n", argv[0]);
                return 2;
        }
        long count = atol(argv[3]), seen = 0, bytes = 0;
        int commit = strcmp(argv[4], "sync") == 0;
        char group[64], err[512];
        /* A group of its own: passes started within the same second must not share one (a pass that
         * committed would leave the next one at the end of the topic, reading nothing). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(group, sizeof(group), "c-read-%ld-%ld-%ld", (long)getpid(), (long)ts.tv_sec, ts.tv_nsec);

        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        set(conf, "bootstrap.servers", argv[1]);
        set(conf, "group.id", group);
        set(conf, "auto.offset.reset", "earliest");
        set(conf, "enable.auto.commit", "false");
        for (int i = 5; i < argc; i++) {
                char *eq = strchr(argv[i], '=');
                if (!eq) {
                        fprintf(stderr, "not key=value: %s\n", argv[i]);
                        return 2;
                }
                *eq = '\0';
                set(conf, argv[i], eq + 1);
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(topics, argv[2], RD_KAFKA_PARTITION_UA);
        rd_kafka_subscribe(rk, topics);
        rd_kafka_topic_partition_list_destroy(topics);

        rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(rk);
        rd_kafka_message_t *batch[500];
        double first = 0, first_cpu = 0, deadline = now(CLOCK_MONOTONIC) + 300;
        while (seen < count && now(CLOCK_MONOTONIC) < deadline) {
                ssize_t got = rd_kafka_consume_batch_queue(queue, 1000, batch, 500);
                long records = 0;
                for (ssize_t i = 0; i < got; i++) {
                        if (!batch[i]->err) {
                                bytes += (long)batch[i]->len;
                                records++;
                        }
                        rd_kafka_message_destroy(batch[i]);
                }
                if (!records)
                        continue;
                if (!seen) {
                        first = now(CLOCK_MONOTONIC);
                        first_cpu = now(CLOCK_PROCESS_CPUTIME_ID);
                }
                seen += records;
                if (commit)
                        rd_kafka_commit(rk, NULL, 0 /* synchronous */);
        }
        double wall = now(CLOCK_MONOTONIC) - first, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - first_cpu;
        printf("{\"records\": %ld, \"bytes\": %ld, \"records_per_s\": %.0f, \"cpu_us_per_record\": %.3f}\n",
               seen, bytes, seen / wall, cpu / seen * 1e6);
        rd_kafka_queue_destroy(queue);
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
        return seen < count;
}
