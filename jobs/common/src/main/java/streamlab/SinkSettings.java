package streamlab;

import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka producer settings of the result-topic sink, identical in both jobs: the same options, the same
 * defaults and the same {@link #toProperties()}, so the Flink KafkaSink and the Storm KafkaBolt cannot drift.
 * Everything not set here is kafka-clients' own default, and both jobs bundle the same kafka-clients version
 * (jobs/pom.xml), so those implicit defaults are the same too.
 *
 * <pre>
 *   --sink-acks all            acks                                   (all, -1, 0, 1)
 *   --sink-linger-ms 5         linger.ms                              (&gt;= 0)
 *   --sink-batch-size 65536    batch.size                             (&gt;= 0 bytes)
 *   --sink-compression none    compression.type                       (none, gzip, snappy, lz4, zstd)
 *   --sink-idempotence true    enable.idempotence                     (true, false)
 *   --sink-max-in-flight 5     max.in.flight.requests.per.connection  (&gt;= 1; &lt;= 5 with idempotence)
 * </pre>
 */
public final class SinkSettings {
    public static final String ACKS = "sink-acks";
    public static final String LINGER_MS = "sink-linger-ms";
    public static final String BATCH_SIZE = "sink-batch-size";
    public static final String COMPRESSION = "sink-compression";
    public static final String IDEMPOTENCE = "sink-idempotence";
    public static final String MAX_IN_FLIGHT = "sink-max-in-flight";
    /** The command-line options (without {@code --}) every job accepts for its sink. */
    public static final Set<String> OPTIONS =
            Set.of(ACKS, LINGER_MS, BATCH_SIZE, COMPRESSION, IDEMPOTENCE, MAX_IN_FLIGHT);

    public static final String DEFAULT_ACKS = "all";
    public static final int DEFAULT_LINGER_MS = 5;
    public static final int DEFAULT_BATCH_SIZE = 65536;
    public static final String DEFAULT_COMPRESSION = "none";
    public static final boolean DEFAULT_IDEMPOTENCE = true;
    public static final int DEFAULT_MAX_IN_FLIGHT = 5;

    /** The producer keys this class sets, in the order {@link #describe(Properties)} reports them. */
    public static final List<String> PRODUCER_KEYS = List.of(
            ProducerConfig.ACKS_CONFIG, ProducerConfig.LINGER_MS_CONFIG, ProducerConfig.BATCH_SIZE_CONFIG,
            ProducerConfig.COMPRESSION_TYPE_CONFIG, ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
            ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION);

    private static final Set<String> ACKS_VALUES = Set.of("all", "-1", "0", "1");
    private static final Set<String> COMPRESSION_VALUES = Set.of("none", "gzip", "snappy", "lz4", "zstd");
    /** Kafka's limit for an idempotent producer (ProducerConfig rejects more). */
    private static final int MAX_IN_FLIGHT_WITH_IDEMPOTENCE = 5;

    private final String acks;
    private final int lingerMs;
    private final int batchSize;
    private final String compression;
    private final boolean idempotence;
    private final int maxInFlight;

    public SinkSettings(String acks, int lingerMs, int batchSize, String compression, boolean idempotence,
                        int maxInFlight) {
        this.acks = acks;
        this.lingerMs = lingerMs;
        this.batchSize = batchSize;
        this.compression = compression;
        this.idempotence = idempotence;
        this.maxInFlight = maxInFlight;
        validate();
    }

    /** The defaults above. */
    public static SinkSettings defaults() {
        return new SinkSettings(DEFAULT_ACKS, DEFAULT_LINGER_MS, DEFAULT_BATCH_SIZE, DEFAULT_COMPRESSION,
                DEFAULT_IDEMPOTENCE, DEFAULT_MAX_IN_FLIGHT);
    }

    /** Reads the {@code --sink-*} options (the caller's Args must accept {@link #OPTIONS}). */
    static SinkSettings from(Args args) {
        return new SinkSettings(
                args.getChoice(ACKS, DEFAULT_ACKS, ACKS_VALUES),
                args.getInt(LINGER_MS, DEFAULT_LINGER_MS),
                args.getInt(BATCH_SIZE, DEFAULT_BATCH_SIZE),
                args.getChoice(COMPRESSION, DEFAULT_COMPRESSION, COMPRESSION_VALUES),
                args.getBoolean(IDEMPOTENCE, DEFAULT_IDEMPOTENCE),
                args.getInt(MAX_IN_FLIGHT, DEFAULT_MAX_IN_FLIGHT));
    }

    /** {@code known} plus the sink options, for a job's Args. */
    public static Set<String> withOptions(Set<String> known) {
        Set<String> all = new LinkedHashSet<>(known);
        all.addAll(OPTIONS);
        return Set.copyOf(all);
    }

    private void validate() {
        if (!ACKS_VALUES.contains(acks)) {
            throw new IllegalArgumentException("--" + ACKS + " must be one of " + ACKS_VALUES + ", got: " + acks);
        }
        if (!COMPRESSION_VALUES.contains(compression)) {
            throw new IllegalArgumentException(
                    "--" + COMPRESSION + " must be one of " + COMPRESSION_VALUES + ", got: " + compression);
        }
        if (lingerMs < 0) {
            throw new IllegalArgumentException("--" + LINGER_MS + " must be >= 0");
        }
        if (batchSize < 0) {
            throw new IllegalArgumentException("--" + BATCH_SIZE + " must be >= 0");
        }
        if (maxInFlight < 1) {
            throw new IllegalArgumentException("--" + MAX_IN_FLIGHT + " must be >= 1");
        }
        if (idempotence && !(acks.equals("all") || acks.equals("-1"))) {
            throw new IllegalArgumentException("--" + IDEMPOTENCE + " true needs --" + ACKS + " all (Kafka rule)");
        }
        if (idempotence && maxInFlight > MAX_IN_FLIGHT_WITH_IDEMPOTENCE) {
            throw new IllegalArgumentException("--" + IDEMPOTENCE + " true needs --" + MAX_IN_FLIGHT + " <= "
                    + MAX_IN_FLIGHT_WITH_IDEMPOTENCE + " (Kafka rule)");
        }
        // Let kafka-clients' own definitions check every value too (types, ranges, valid strings).
        Properties check = toProperties();
        check.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "validation.invalid:9092");
        check.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        check.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try {
            ProducerConfig.configDef().parse(check);
        } catch (ConfigException e) {
            throw new IllegalArgumentException("invalid sink setting: " + e.getMessage(), e);
        }
    }

    /** The producer properties both jobs give their sink; each job adds bootstrap.servers (and serializers). */
    public Properties toProperties() {
        Properties props = new Properties();
        props.setProperty(ProducerConfig.ACKS_CONFIG, acks);
        props.setProperty(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(lingerMs));
        props.setProperty(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(batchSize));
        props.setProperty(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        props.setProperty(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotence));
        props.setProperty(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, Integer.toString(maxInFlight));
        return props;
    }

    /** {@link #describe(Properties)} of {@link #toProperties()}. */
    public Map<String, String> describe() {
        return describe(toProperties());
    }

    /**
     * The {@code streamlab.sink.*} read-back entries taken from the producer properties a sink was really built
     * with (a key the properties lack reads {@code "(kafka default)"}).
     */
    public static Map<String, String> describe(Properties producerConfig) {
        Map<String, String> out = new LinkedHashMap<>();
        out.put(ReadBack.SINK_ACKS, value(producerConfig, ProducerConfig.ACKS_CONFIG));
        out.put(ReadBack.SINK_LINGER_MS, value(producerConfig, ProducerConfig.LINGER_MS_CONFIG));
        out.put(ReadBack.SINK_BATCH_SIZE, value(producerConfig, ProducerConfig.BATCH_SIZE_CONFIG));
        out.put(ReadBack.SINK_COMPRESSION, value(producerConfig, ProducerConfig.COMPRESSION_TYPE_CONFIG));
        out.put(ReadBack.SINK_IDEMPOTENCE, value(producerConfig, ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
        out.put(ReadBack.SINK_MAX_IN_FLIGHT,
                value(producerConfig, ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION));
        return out;
    }

    private static String value(Properties props, String key) {
        Object value = props.get(key);
        return value == null ? "(kafka default)" : String.valueOf(value);
    }

    public String acks() {
        return acks;
    }

    public int lingerMs() {
        return lingerMs;
    }

    public int batchSize() {
        return batchSize;
    }

    public String compression() {
        return compression;
    }

    public boolean idempotence() {
        return idempotence;
    }

    public int maxInFlight() {
        return maxInFlight;
    }

    @Override
    public String toString() {
        return "SinkSettings" + describe();
    }
}
