package streamlab;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Set;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Reads JSON records from a Kafka topic, adds {@code engine="flink"} and {@code processed_ms}, and writes them
 * to a result topic with at-least-once delivery: AT_LEAST_ONCE checkpoints record the source offsets, and the
 * AT_LEAST_ONCE KafkaSink flushes (and waits for acks=all) before every checkpoint completes; after a failure
 * the job restarts (fixed delay) from the last checkpoint and replays everything after it.
 *
 * <p>Options: --bootstrap --input-topic --output-topic --group-id [--checkpoint-interval-s 5] [--parallelism N]
 * [--restart-attempts 1000000] [--restart-delay-s 2]
 */
public final class FlinkAtLeastOnceJob {
    static final String ENGINE = "flink";
    static final String SOURCE_UID = "streamlab-kafka-source";
    static final String ENRICH_UID = "streamlab-enrich";
    static final String SINK_UID = "streamlab-kafka-sink";

    private static final Set<String> OPTIONS = Set.of(
            "bootstrap", "input-topic", "output-topic", "group-id", "checkpoint-interval-s",
            "parallelism", "restart-attempts", "restart-delay-s");

    private FlinkAtLeastOnceJob() {}

    /** Parsed job options. */
    record Options(String bootstrap, String inputTopic, String outputTopic, String groupId,
                   long checkpointIntervalS, Integer parallelism, int restartAttempts, long restartDelayS) {

        static Options parse(String[] argv) {
            Args args = new Args(argv, OPTIONS);
            Options o = new Options(
                    args.required("bootstrap"),
                    args.required("input-topic"),
                    args.required("output-topic"),
                    args.required("group-id"),
                    args.getLong("checkpoint-interval-s", 5),
                    args.has("parallelism") ? args.getInt("parallelism", 0) : null,
                    args.getInt("restart-attempts", 1_000_000),
                    args.getLong("restart-delay-s", 2));
            if (o.checkpointIntervalS <= 0) {
                throw new IllegalArgumentException("--checkpoint-interval-s must be > 0");
            }
            if (o.parallelism != null && o.parallelism <= 0) {
                throw new IllegalArgumentException("--parallelism must be > 0");
            }
            if (o.restartAttempts < 0 || o.restartDelayS < 0) {
                throw new IllegalArgumentException("--restart-attempts/--restart-delay-s must be >= 0");
            }
            return o;
        }

        String jobName() {
            return "streamlab-flink-" + inputTopic;
        }
    }

    public static void main(String[] argv) throws Exception {
        Options options = Options.parse(argv);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(jobConfiguration(options));
        build(env, options);
        env.execute(options.jobName());
    }

    /** Job-level configuration: fixed-delay restarts (Flink 2.x has no RestartStrategies API any more). */
    static Configuration jobConfiguration(Options options) {
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, options.restartAttempts());
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY,
                Duration.ofSeconds(options.restartDelayS()));
        return conf;
    }

    /** Adds checkpointing and the source -> enrich -> sink pipeline to {@code env}. */
    static void build(StreamExecutionEnvironment env, Options options) {
        env.enableCheckpointing(options.checkpointIntervalS() * 1000L, CheckpointingMode.AT_LEAST_ONCE);
        if (options.parallelism() != null) {
            env.setParallelism(options.parallelism());
        }

        KafkaSource<KafkaRecord> source = KafkaSource.<KafkaRecord>builder()
                .setBootstrapServers(options.bootstrap())
                .setTopics(options.inputTopic())
                .setGroupId(options.groupId())
                // Resume from the group's committed offsets (committed on checkpoint completion); start from
                // the beginning if the group has none. Restarts inside the job use the checkpointed offsets.
                .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setDeserializer(new KeyValueDeserializer())
                .build();

        KafkaSink<KafkaRecord> sink = KafkaSink.<KafkaRecord>builder()
                .setBootstrapServers(options.bootstrap())
                .setDeliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                .setProperty(ProducerConfig.ACKS_CONFIG, "all")
                .setRecordSerializer(new KeyValueSerializer(options.outputTopic()))
                .build();

        DataStream<KafkaRecord> input = env
                .fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
                .uid(SOURCE_UID);
        DataStream<KafkaRecord> enriched = input
                .map(new EnrichFunction())
                .name("enrich")
                .uid(ENRICH_UID);
        enriched.sinkTo(sink)
                .name("kafka-sink")
                .uid(SINK_UID);
    }

    /** Adds engine/processed_ms; malformed values are wrapped, never thrown. */
    static final class EnrichFunction implements MapFunction<KafkaRecord, KafkaRecord> {
        @Override
        public KafkaRecord map(KafkaRecord in) {
            Enrich.Result out = Enrich.apply(ENGINE, in.key, in.value, System.currentTimeMillis());
            return new KafkaRecord(out.key, out.value);
        }
    }

    /** Kafka bytes -> UTF-8 key/value strings (nulls preserved). */
    static final class KeyValueDeserializer implements KafkaRecordDeserializationSchema<KafkaRecord> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<KafkaRecord> out) {
            out.collect(new KafkaRecord(utf8(record.key()), utf8(record.value())));
        }

        @Override
        public TypeInformation<KafkaRecord> getProducedType() {
            return TypeInformation.of(KafkaRecord.class);
        }

        private static String utf8(byte[] bytes) {
            return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
        }
    }

    /** UTF-8 key/value strings -> a record for the output topic (partitioned by key, or sticky if the key is null). */
    static final class KeyValueSerializer implements KafkaRecordSerializationSchema<KafkaRecord> {
        private final String topic;

        KeyValueSerializer(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(KafkaRecord element, KafkaSinkContext context, Long timestamp) {
            return new ProducerRecord<>(topic, utf8(element.key), utf8(element.value));
        }

        private static byte[] utf8(String s) {
            return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
        }
    }
}
