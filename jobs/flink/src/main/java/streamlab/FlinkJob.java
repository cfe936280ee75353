package streamlab;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceOptions;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.environment.CheckpointConfig;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Reads JSON records from a Kafka topic, adds {@code engine="flink"} and {@code processed_ms}, and writes them
 * to a result topic under the chosen {@link Guarantee}; after a failure the job restarts (fixed delay).
 * <ul>
 * <li>at_least_once: AT_LEAST_ONCE checkpoints record the source offsets, and the AT_LEAST_ONCE KafkaSink
 * flushes (and waits for the acks) before every checkpoint completes; a restart replays everything after the
 * last checkpoint.
 * <li>exactly_once: EXACTLY_ONCE checkpoints, and a transactional KafkaSink whose transactions commit when a
 * checkpoint completes; a restart aborts the open ones, so a read_committed reader sees each record once.
 * <li>at_most_once: no checkpoints; the source commits offsets as it reads, the sink waits for nothing, and a
 * restarted reader resumes at the newest record, so nothing is read twice and what was in flight is lost.
 * </ul>
 *
 * <p>Options: [--kafka-config FILE] --bootstrap --input-topic --output-topic --group-id [--guarantee at_least_once]
 * [--checkpoint-interval-s 5] [--parallelism N]
 * [--tolerable-failed-checkpoints 3] [--restart-attempts 1000000] [--restart-delay-s 2] and the sink options of
 * {@link SinkSettings} (--sink-acks all --sink-linger-ms 5 --sink-batch-size 65536 --sink-compression none
 * --sink-idempotence true --sink-max-in-flight 5).
 *
 * <p>The settings the job really runs with are published as global job parameters ({@link ReadBack} keys), so
 * GET /jobs/&lt;jobid&gt;/config shows them under execution-config.user-config.
 */
public final class FlinkJob {
    static final String ENGINE = "flink";
    static final String SOURCE_UID = "streamlab-kafka-source";
    static final String ENRICH_UID = "streamlab-enrich";
    static final String SINK_UID = "streamlab-kafka-sink";
    /** Below the brokers' transaction.max.timeout.ms default (15 min), above any restart the lab sees. */
    static final long TRANSACTION_TIMEOUT_MS = 600_000;
    /** How often an at-most-once source commits what it read (the drain waits for the whole topic). */
    static final long AUTO_COMMIT_INTERVAL_MS = 1_000;
    /** Source -> enrich -> sink with equal parallelism and no repartitioning: one chained task. */
    static final String GROUPING_CHAINED = "forward (chained)";

    private static final Set<String> OPTIONS = Guarantee.withOption(DeliberateLoss.withOption(
            KafkaConnection.withOption(SinkSettings.withOptions(Set.of(
                    "bootstrap", "input-topic", "output-topic", "group-id", "checkpoint-interval-s",
                    "parallelism", "tolerable-failed-checkpoints", "restart-attempts", "restart-delay-s")))));

    private FlinkJob() {}

    /** Parsed job options. */
    record Options(String bootstrap, String inputTopic, String outputTopic, String groupId,
                   long checkpointIntervalS, Integer parallelism, int tolerableFailedCheckpoints,
                   int restartAttempts, long restartDelayS, SinkSettings sink, KafkaConnection kafka,
                   DeliberateLoss loss, Guarantee guarantee) {

        static Options parse(String[] argv) {
            Args args = new Args(argv, OPTIONS);
            Options o = new Options(
                    args.required("bootstrap"),
                    args.required("input-topic"),
                    args.required("output-topic"),
                    args.required("group-id"),
                    args.getLong("checkpoint-interval-s", 5),
                    args.has("parallelism") ? args.getInt("parallelism", 0) : null,
                    args.getInt("tolerable-failed-checkpoints", 3),
                    args.getInt("restart-attempts", 1_000_000),
                    args.getLong("restart-delay-s", 2),
                    SinkSettings.from(args),
                    KafkaConnection.from(args),
                    DeliberateLoss.from(args),
                    Guarantee.from(args, EnumSet.allOf(Guarantee.class), ""));
            if (o.guarantee == Guarantee.EXACTLY_ONCE && !o.sink.idempotence()) {
                throw new IllegalArgumentException("--guarantee exactly_once needs --sink-idempotence true: "
                        + "a transactional producer is idempotent");
            }
            if (o.guarantee == Guarantee.EXACTLY_ONCE && o.checkpointIntervalS * 1000 >= TRANSACTION_TIMEOUT_MS) {
                throw new IllegalArgumentException("--checkpoint-interval-s must be below the exactly-once sink's "
                        + "transaction timeout (" + TRANSACTION_TIMEOUT_MS / 1000 + " s)");
            }
            if (o.checkpointIntervalS <= 0) {
                throw new IllegalArgumentException("--checkpoint-interval-s must be > 0");
            }
            if (o.parallelism != null && o.parallelism <= 0) {
                throw new IllegalArgumentException("--parallelism must be > 0");
            }
            if (o.tolerableFailedCheckpoints < 0) {
                throw new IllegalArgumentException("--tolerable-failed-checkpoints must be >= 0");
            }
            if (o.restartAttempts < 0 || o.restartDelayS < 0) {
                throw new IllegalArgumentException("--restart-attempts/--restart-delay-s must be >= 0");
            }
            return o;
        }

        String jobName() {
            return "streamlab-flink-" + inputTopic;
        }

        /** Unique per run (the group id is), so no two runs' sinks fence each other's transactions. */
        String transactionalIdPrefix() {
            return groupId + "-tx";
        }
    }

    public static void main(String[] argv) throws Exception {
        Options options = Options.parse(argv);
        if (options.guarantee() == Guarantee.EXACTLY_ONCE) {
            TransactionTimeout.checkAgainstBrokers(TRANSACTION_TIMEOUT_MS, options.kafka().toProperties(),
                    options.bootstrap());
        }
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

    /**
     * Adds checkpointing and the source -> enrich -> sink pipeline to {@code env}, then publishes what was
     * configured as global job parameters; returns those {@code streamlab.*} entries.
     */
    static Map<String, String> build(StreamExecutionEnvironment env, Options options) {
        if (options.guarantee() != Guarantee.AT_MOST_ONCE) {
            env.enableCheckpointing(options.checkpointIntervalS() * 1000L,
                    options.guarantee() == Guarantee.EXACTLY_ONCE
                            ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);
            env.getCheckpointConfig().setTolerableCheckpointFailureNumber(options.tolerableFailedCheckpoints());
        }
        if (options.parallelism() != null) {
            env.setParallelism(options.parallelism());
        }

        KafkaSource<KafkaRecord> source = source(options);
        KafkaSink<KafkaRecord> sink = sink(options);

        DataStream<KafkaRecord> input = env
                .fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
                .uid(SOURCE_UID);
        EnrichFunction enrich = new EnrichFunction(options.loss());
        DataStream<KafkaRecord> enriched = input
                .flatMap(enrich)
                .name("enrich")
                .uid(ENRICH_UID);
        DataStreamSink<KafkaRecord> output = enriched.sinkTo(sink)
                .name("kafka-sink")
                .uid(SINK_UID);

        Map<String, String> settings = readBack(env, input.getTransformation(), enriched.getTransformation(),
                output.getTransformation(), sink, source);
        settings.put(ReadBack.TEST_DROP_EVERY, Long.toString(enrich.loss().every()));
        Map<String, String> parameters = new HashMap<>(env.getConfig().getGlobalJobParameters().toMap());
        parameters.putAll(settings);
        env.getConfig().setGlobalJobParameters(Configuration.fromMap(parameters));
        return settings;
    }

    /**
     * The input: with checkpoints, it resumes from the group's committed offsets (committed on checkpoint
     * completion), from the beginning if the group has none, and a restart inside the job uses the checkpointed
     * offsets. At most once, a reader starts at the newest record, also after a restart, and the consumer
     * commits what it read (what the drain watches).
     */
    static KafkaSource<KafkaRecord> source(Options options) {
        boolean atMostOnce = options.guarantee() == Guarantee.AT_MOST_ONCE;
        return KafkaSource.<KafkaRecord>builder()
                .setBootstrapServers(options.bootstrap())
                .setProperties(options.kafka().toProperties())
                .setTopics(options.inputTopic())
                .setGroupId(options.groupId())
                .setStartingOffsets(atMostOnce ? new NewestOnEveryStart()
                        : OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setProperty(KafkaSourceOptions.COMMIT_OFFSETS_ON_CHECKPOINT.key(), Boolean.toString(!atMostOnce))
                .setProperty(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, Boolean.toString(atMostOnce))
                .setProperty(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, Long.toString(AUTO_COMMIT_INTERVAL_MS))
                .setDeserializer(new KeyValueDeserializer())
                .build();
    }

    /** The Flink sink guarantee of each {@link Guarantee}. */
    static DeliveryGuarantee deliveryGuarantee(Guarantee guarantee) {
        switch (guarantee) {
            case AT_MOST_ONCE:
                return DeliveryGuarantee.NONE;
            case EXACTLY_ONCE:
                return DeliveryGuarantee.EXACTLY_ONCE;
            default:
                return DeliveryGuarantee.AT_LEAST_ONCE;
        }
    }

    /** The result-topic sink: the shared {@link SinkSettings} producer properties, under the run's guarantee. */
    static KafkaSink<KafkaRecord> sink(Options options) {
        Properties props = producerProperties(options);
        if (options.guarantee() == Guarantee.EXACTLY_ONCE) {
            props.setProperty(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Long.toString(TRANSACTION_TIMEOUT_MS));
        }
        var builder = KafkaSink.<KafkaRecord>builder()
                .setBootstrapServers(options.bootstrap())
                .setDeliveryGuarantee(deliveryGuarantee(options.guarantee()))
                .setKafkaProducerConfig(props)
                .setRecordSerializer(new KeyValueSerializer(options.outputTopic()));
        if (options.guarantee() == Guarantee.EXACTLY_ONCE) {
            builder.setTransactionalIdPrefix(options.transactionalIdPrefix());
        }
        return builder.build();
    }

    /** The shared sink settings plus the connection settings. */
    static Properties producerProperties(Options options) {
        Properties props = options.sink().toProperties();
        props.putAll(options.kafka().toProperties());
        return props;
    }

    /** The {@code streamlab.*} entries, each taken from the object Flink will run with. */
    static Map<String, String> readBack(StreamExecutionEnvironment env, Transformation<?> source,
                                        Transformation<?> enrich, Transformation<?> sink,
                                        KafkaSink<?> kafkaSink, KafkaSource<?> kafkaSource) {
        Properties producerConfig = producerConfig(kafkaSink);
        Configuration sourceConf = sourceConfiguration(kafkaSource);
        Boolean commitsOnCheckpoint = sourceConf.get(KafkaSourceOptions.COMMIT_OFFSETS_ON_CHECKPOINT);
        DeliveryGuarantee delivery = (DeliveryGuarantee) field(kafkaSink, "deliveryGuarantee");
        Properties build = ReadBack.buildProperties(FlinkJob.class);
        CheckpointConfig checkpoints = env.getCheckpointConfig();
        ReadableConfig conf = env.getConfiguration();
        Map<String, String> out = new LinkedHashMap<>();
        out.put(ReadBack.ENGINE, ENGINE);
        out.put(ReadBack.ENGINE_VERSION, EnvironmentInformation.getVersion());
        out.put(ReadBack.BUILD_ENGINE_VERSION, build.getProperty("engine.version"));
        out.put(ReadBack.SOURCE_TASKS, Integer.toString(source.getParallelism()));
        out.put(ReadBack.PROCESS_TASKS, Integer.toString(enrich.getParallelism()));
        out.put(ReadBack.SINK_TASKS, Integer.toString(sink.getParallelism()));
        out.put(ReadBack.GROUPING, grouping(env, source, enrich, sink));
        out.putAll(SinkSettings.describe(producerConfig));
        out.putAll(KafkaConnection.describe(producerConfig));
        out.put(ReadBack.GUARANTEE, guarantee(checkpoints, delivery).option());
        out.put(ReadBack.SINK_DELIVERY_GUARANTEE, delivery.toString());
        if (delivery == DeliveryGuarantee.EXACTLY_ONCE) {
            out.put(ReadBack.TRANSACTIONAL_ID_PREFIX, String.valueOf(field(kafkaSink, "transactionalIdPrefix")));
            out.put(ReadBack.TRANSACTION_TIMEOUT_MS,
                    String.valueOf(producerConfig.get(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG)));
        }
        out.put(ReadBack.KAFKA_CLIENTS_VERSION, ReadBack.kafkaClientsVersion());
        out.put(ReadBack.CONNECTOR_VERSION, build.getProperty("connector.version"));
        if (checkpoints.isCheckpointingEnabled()) {
            out.put(ReadBack.CHECKPOINT_INTERVAL_MS, Long.toString(checkpoints.getCheckpointInterval()));
            out.put(ReadBack.CHECKPOINTING_MODE, checkpoints.getCheckpointingConsistencyMode().name());
            out.put(ReadBack.TOLERABLE_FAILED_CHECKPOINTS,
                    Integer.toString(checkpoints.getTolerableCheckpointFailureNumber()));
        } else {
            out.put(ReadBack.CHECKPOINTING_MODE, ReadBack.NONE);
        }
        String strategy = conf.getOptional(RestartStrategyOptions.RESTART_STRATEGY).orElse(null);
        out.put(ReadBack.RESTART_STRATEGY, strategy == null ? "(cluster default)" : strategy);
        out.put(ReadBack.RESTART_ATTEMPTS,
                String.valueOf(conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS)));
        out.put(ReadBack.RESTART_DELAY_MS,
                Long.toString(conf.get(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY).toMillis()));
        out.put(ReadBack.OFFSET_COMMIT, offsetCommit(commitsOnCheckpoint, sourceConf, kafkaSource));
        out.put(ReadBack.STARTING_OFFSETS, startingOffsets(kafkaSource));
        return out;
    }

    /**
     * What the job guarantees, from what it was built with: no checkpoints and a sink that waits for nothing
     * is at most once; exactly-once checkpoints and a transactional sink exactly once; else at least once.
     */
    static Guarantee guarantee(CheckpointConfig checkpoints, DeliveryGuarantee delivery) {
        if (!checkpoints.isCheckpointingEnabled() && delivery == DeliveryGuarantee.NONE) {
            return Guarantee.AT_MOST_ONCE;
        }
        if (checkpoints.isCheckpointingEnabled() && delivery == DeliveryGuarantee.EXACTLY_ONCE
                && checkpoints.getCheckpointingConsistencyMode() == CheckpointingMode.EXACTLY_ONCE) {
            return Guarantee.EXACTLY_ONCE;
        }
        return Guarantee.AT_LEAST_ONCE;
    }

    /** When the source commits offsets, as the built source holds it. */
    static String offsetCommit(Boolean commitsOnCheckpoint, Configuration sourceConf, KafkaSource<?> source) {
        if (Boolean.TRUE.equals(commitsOnCheckpoint)) {
            return "on checkpoint completion";
        }
        Properties props = (Properties) field(source, "props");
        if (Boolean.parseBoolean(props.getProperty(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG))) {
            return "as read, every " + props.getProperty(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG) + " ms";
        }
        return "none";
    }

    /** Where the source's readers start: the initializer's marker (KafkaPartitionSplit's -1, -2, -3). */
    static String startingOffsets(KafkaSource<?> source) {
        Object initializer = field(source, "startingOffsetsInitializer");
        if (initializer instanceof NewestOnEveryStart) {
            return "latest, also after a restart";
        }
        if (!initializer.getClass().getSimpleName().equals("ReaderHandledOffsetsInitializer")) {
            return initializer.getClass().getSimpleName();
        }
        long marker = (long) field(initializer, "startingOffset");
        if (marker == -1L) {
            return "latest";
        }
        if (marker == -3L) {
            return "committed, else " + ((org.apache.flink.connector.kafka.source.enumerator.initializer
                    .OffsetsInitializer) initializer).getAutoOffsetResetStrategy().toString().toLowerCase(
                    java.util.Locale.ROOT);
        }
        return marker == -2L ? "earliest" : Long.toString(marker);
    }

    /** A private field of a connector object (the builders keep what they built there, with no getter). */
    static Object field(Object owner, String name) {
        try {
            java.lang.reflect.Field field = owner.getClass().getDeclaredField(name);
            field.setAccessible(true);
            return field.get(owner);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read " + name + " back from " + owner.getClass().getName(), e);
        }
    }

    /**
     * How records move from source to enrich to sink, by Flink's rules: each operator reads its predecessor
     * directly (no partitioning transformation in between) with the same parallelism, so the edges are
     * forward; with chaining enabled they are then fused into one task.
     */
    static String grouping(StreamExecutionEnvironment env, Transformation<?> source, Transformation<?> enrich,
                           Transformation<?> sink) {
        boolean direct = enrich.getInputs().equals(List.of(source)) && sink.getInputs().equals(List.of(enrich));
        boolean sameParallelism = source.getParallelism() == enrich.getParallelism()
                && enrich.getParallelism() == sink.getParallelism();
        if (!direct || !sameParallelism) {
            return "rebalance";
        }
        return env.isChainingEnabled() ? GROUPING_CHAINED : "forward";
    }

    /**
     * The producer properties the built KafkaSink holds (KafkaSink#getKafkaProducerConfig is protected, so
     * reflection): what the KafkaWriter will give its KafkaProducer, including the builder's own additions.
     */
    static Properties producerConfig(KafkaSink<?> sink) {
        try {
            Method getter = KafkaSink.class.getDeclaredMethod("getKafkaProducerConfig");
            getter.setAccessible(true);
            return (Properties) getter.invoke(sink);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read the KafkaSink's producer config back", e);
        }
    }

    /** KafkaSource's configuration as the built source holds it (package-private getter). */
    static Configuration sourceConfiguration(KafkaSource<?> source) {
        try {
            Method getter = KafkaSource.class.getDeclaredMethod("getConfiguration");
            getter.setAccessible(true);
            return (Configuration) getter.invoke(source);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read the KafkaSource's configuration back", e);
        }
    }

    /**
     * Adds engine/processed_ms; malformed values are wrapped, never thrown. A record that {@link DeliberateLoss}
     * drops is consumed without output: lost on purpose.
     */
    static final class EnrichFunction implements FlatMapFunction<KafkaRecord, KafkaRecord> {
        private static final long serialVersionUID = 1L;
        private final DeliberateLoss loss;

        EnrichFunction() {
            this(new DeliberateLoss(0));
        }

        EnrichFunction(DeliberateLoss loss) {
            this.loss = loss;
        }

        DeliberateLoss loss() {
            return loss;
        }

        @Override
        public void flatMap(KafkaRecord in, Collector<KafkaRecord> out) {
            if (!loss.drops(in.value)) {
                out.collect(map(in));
            }
        }

        KafkaRecord map(KafkaRecord in) {
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
