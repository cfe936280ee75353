package streamlab;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The {@code streamlab.*} keys under which both jobs publish the settings they really run with (Flink: global
 * job parameters, GET /jobs/&lt;id&gt;/config -> execution-config.user-config; Storm: the topology configuration,
 * {@code storm-probe conf <name>}). The same key means the same thing in both engines. Values are strings.
 */
public final class ReadBack {
    public static final String PREFIX = "streamlab.";

    public static final String ENGINE = PREFIX + "engine";
    /** The engine version where the job's main() ran (Flink: the JobManager's; Storm: the submitting host's). */
    public static final String ENGINE_VERSION = PREFIX + "engine_version";
    /** The engine version the jar was compiled against (streamlab-job.properties). */
    public static final String BUILD_ENGINE_VERSION = PREFIX + "build_engine_version";
    public static final String SOURCE_TASKS = PREFIX + "source_tasks";
    public static final String PROCESS_TASKS = PREFIX + "process_tasks";
    public static final String SINK_TASKS = PREFIX + "sink_tasks";
    public static final String GROUPING = PREFIX + "grouping";
    public static final String SINK_ACKS = PREFIX + "sink.acks";
    public static final String SINK_LINGER_MS = PREFIX + "sink.linger_ms";
    public static final String SINK_BATCH_SIZE = PREFIX + "sink.batch_size";
    public static final String SINK_COMPRESSION = PREFIX + "sink.compression";
    public static final String SINK_IDEMPOTENCE = PREFIX + "sink.idempotence";
    public static final String SINK_MAX_IN_FLIGHT = PREFIX + "sink.max_in_flight";
    public static final String SINK_DELIVERY_GUARANTEE = PREFIX + "sink.delivery_guarantee";
    /** The {@link Guarantee} the job was built to keep, judged from what it was built with. */
    public static final String GUARANTEE = PREFIX + "guarantee";
    public static final String KAFKA_SECURITY_PROTOCOL = PREFIX + "kafka.security_protocol";
    public static final String KAFKA_SASL_MECHANISM = PREFIX + "kafka.sasl_mechanism";
    public static final String KAFKA_CLIENTS_VERSION = PREFIX + "kafka_clients_version";
    public static final String CONNECTOR_VERSION = PREFIX + "connector_version";
    /** {@link DeliberateLoss}: every how many msg_ids the job drops on purpose ("0": none). */
    public static final String TEST_DROP_EVERY = PREFIX + "test_drop_every";
    // Flink only.
    public static final String CHECKPOINT_INTERVAL_MS = PREFIX + "checkpoint_interval_ms";
    public static final String CHECKPOINTING_MODE = PREFIX + "checkpointing_mode";
    public static final String TOLERABLE_FAILED_CHECKPOINTS = PREFIX + "tolerable_failed_checkpoints";
    public static final String RESTART_STRATEGY = PREFIX + "restart_strategy";
    public static final String RESTART_ATTEMPTS = PREFIX + "restart_attempts";
    public static final String RESTART_DELAY_MS = PREFIX + "restart_delay_ms";
    public static final String OFFSET_COMMIT = PREFIX + "offset_commit";
    /** Where a source reader starts, at the first start and after a restart without a checkpoint. */
    public static final String STARTING_OFFSETS = PREFIX + "starting_offsets";
    public static final String TRANSACTIONAL_ID_PREFIX = PREFIX + "transactional_id_prefix";
    public static final String TRANSACTION_TIMEOUT_MS = PREFIX + "transaction_timeout_ms";
    // Storm only.
    public static final String OFFSET_COMMIT_PERIOD_MS = PREFIX + "offset_commit_period_ms";
    public static final String WAIT_STRATEGY = PREFIX + "wait_strategy";
    public static final String WAIT_PARK_US = PREFIX + "wait_park_us";
    public static final String PROCESSING_GUARANTEE = PREFIX + "processing_guarantee";
    public static final String ACKERS = PREFIX + "ackers";

    /** Both sinks: the sink acks a record (Flink: lets its checkpoint complete) only once Kafka acked it. */
    public static final String AT_LEAST_ONCE = "at-least-once";
    /** A sink that waits for no acknowledgement before it lets its input go. */
    public static final String NONE = "none";

    /** The classpath resource (filtered by Maven) with the versions a job jar was built with. */
    public static final String BUILD_PROPERTIES = "/streamlab-job.properties";

    private ReadBack() {}

    /** The kafka-clients version really loaded (the one in the job jar), as the client itself reports it. */
    public static String kafkaClientsVersion() {
        return AppInfoParser.getVersion();
    }

    /**
     * {@link #BUILD_PROPERTIES} next to {@code anchor} (a class of the job jar): engine, engine.version,
     * connector, connector.version, kafka.clients.version, jackson.version.
     */
    public static Properties buildProperties(Class<?> anchor) {
        Properties props = new Properties();
        try (InputStream in = anchor.getResourceAsStream(BUILD_PROPERTIES)) {
            if (in == null) {
                throw new IllegalStateException(BUILD_PROPERTIES + " is missing next to " + anchor.getName());
            }
            props.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return props;
    }
}
