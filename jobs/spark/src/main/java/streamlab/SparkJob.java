package streamlab;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/**
 * The Spark job's options, checked the way the other jobs check theirs ({@link Args}, {@link SinkSettings},
 * {@link KafkaConnection}, {@link Guarantee}, {@link DeliberateLoss}), and turned into what the PySpark query
 * needs: {@link #plan(String[])} returns it as JSON, with the {@code streamlab.*} settings the job runs with.
 */
public final class SparkJob {
    static final String ENGINE = "spark";
    static final String MICRO_BATCH = "micro_batch";
    static final String CONTINUOUS = "continuous";
    /** What Spark's Kafka sink cannot give (Structured Streaming guide, Kafka integration). */
    static final String AT_LEAST_ONCE_ONLY =
            "Spark's Kafka sink is at-least-once only: a batch re-run after a failure writes its records again,"
            + " and a record is read from Kafka again until its batch is committed";

    private static final Set<String> OPTIONS = Guarantee.withOption(DeliberateLoss.withOption(
            KafkaConnection.withOption(SinkSettings.withOptions(Set.of(
                    "bootstrap", "input-topic", "output-topic", "group-id", "name", "trigger",
                    "trigger-interval-ms", "max-offsets-per-trigger", "shuffle-partitions", "checkpoint-dir")))));
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private SparkJob() {}

    /** The plan of the query as JSON; an IllegalArgumentException names a bad option. */
    public static String plan(String[] argv) {
        Args args = new Args(argv, OPTIONS);
        Guarantee guarantee = Guarantee.from(args, EnumSet.of(Guarantee.AT_LEAST_ONCE), AT_LEAST_ONCE_ONLY);
        String trigger = args.getChoice("trigger", MICRO_BATCH, Set.of(MICRO_BATCH, CONTINUOUS));
        long intervalMs = args.getLong("trigger-interval-ms", 1000);
        long maxOffsets = args.getLong("max-offsets-per-trigger", 0);
        int shufflePartitions = args.getInt("shuffle-partitions", 1);
        if (intervalMs < 0 || maxOffsets < 0 || shufflePartitions < 1) {
            throw new IllegalArgumentException("--trigger-interval-ms and --max-offsets-per-trigger must be >= 0,"
                    + " --shuffle-partitions >= 1");
        }
        if (trigger.equals(CONTINUOUS) && intervalMs < 1) {
            // The interval of a continuous query is its checkpoint (epoch) interval: it cannot be 0.
            throw new IllegalArgumentException("--trigger continuous needs --trigger-interval-ms >= 1");
        }
        if (trigger.equals(CONTINUOUS) && maxOffsets > 0) {
            throw new IllegalArgumentException(
                    "--max-offsets-per-trigger applies to micro-batches only: leave it 0 with --trigger continuous");
        }
        SinkSettings sink = SinkSettings.from(args);
        KafkaConnection kafka = KafkaConnection.from(args);
        DeliberateLoss loss = DeliberateLoss.from(args);
        Properties connection = kafka.toProperties();
        Properties producer = sink.toProperties();

        Map<String, Object> settings = new LinkedHashMap<>();
        Properties build = ReadBack.buildProperties(SparkJob.class);
        settings.put(ReadBack.ENGINE, ENGINE);
        settings.put(ReadBack.BUILD_ENGINE_VERSION, build.getProperty("engine.version"));
        settings.put(ReadBack.GUARANTEE, guarantee.option());
        settings.put(ReadBack.CONNECTOR_VERSION, build.getProperty("connector.version"));
        settings.put(ReadBack.KAFKA_CLIENTS_VERSION, ReadBack.kafkaClientsVersion());
        settings.put(ReadBack.STARTING_OFFSETS, "earliest");
        settings.put(ReadBack.OFFSET_COMMIT, "after each batch's commit, to group " + args.required("group-id"));
        settings.put(ReadBack.SINK_DELIVERY_GUARANTEE, ReadBack.AT_LEAST_ONCE);
        settings.put(ReadBack.PREFIX + "trigger", trigger);
        settings.put(ReadBack.PREFIX + "trigger_interval_ms", intervalMs);
        settings.put(ReadBack.PREFIX + "max_offsets_per_trigger", maxOffsets);
        settings.put(ReadBack.PREFIX + "shuffle_partitions", shufflePartitions);
        settings.put(ReadBack.TEST_DROP_EVERY, loss.every());
        sink.describe(producer).forEach(settings::put);
        KafkaConnection.describe(connection).forEach(settings::put);

        Map<String, Object> plan = new LinkedHashMap<>();
        plan.put("bootstrap", args.required("bootstrap"));
        plan.put("input_topic", args.required("input-topic"));
        plan.put("output_topic", args.required("output-topic"));
        plan.put("group_id", args.required("group-id"));
        plan.put("name", args.required("name"));
        plan.put("checkpoint_dir", args.required("checkpoint-dir"));
        plan.put("kafka_config", args.get(KafkaConnection.OPTION, ""));
        plan.put("trigger", trigger);
        plan.put("trigger_interval_ms", intervalMs);
        plan.put("max_offsets_per_trigger", maxOffsets);
        plan.put("shuffle_partitions", shufflePartitions);
        plan.put("test_drop_every", loss.every());
        plan.put("connection", toMap(connection));
        plan.put("producer", toMap(producer));
        plan.put("settings", settings);
        try {
            return MAPPER.writeValueAsString(plan);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialise the plan", e);
        }
    }

    private static Map<String, String> toMap(Properties props) {
        Map<String, String> out = new LinkedHashMap<>();
        props.stringPropertyNames().stream().sorted().forEach(name -> out.put(name, props.getProperty(name)));
        return out;
    }
}
