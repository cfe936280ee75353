package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

class SinkSettingsTest {
    /** The same literal is asserted by the Flink and the Storm job tests against their built sinks. */
    static final Map<String, String> DEFAULT_PRODUCER = Map.of(
            "acks", "all", "linger.ms", "5", "batch.size", "65536", "compression.type", "none",
            "enable.idempotence", "true", "max.in.flight.requests.per.connection", "5");

    private static SinkSettings parse(String... argv) {
        return SinkSettings.from(new Args(argv, SinkSettings.OPTIONS));
    }

    @Test
    void defaultsAreExplicitProducerProperties() {
        Properties props = parse().toProperties();
        assertEquals(DEFAULT_PRODUCER, Map.copyOf(props));
        assertEquals(DEFAULT_PRODUCER, Map.copyOf(SinkSettings.defaults().toProperties()));
        assertEquals(Set.copyOf(SinkSettings.PRODUCER_KEYS), props.stringPropertyNames());
    }

    @Test
    void describeUsesTheSharedReadBackKeys() {
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("streamlab.sink.acks", "all");
        expected.put("streamlab.sink.linger_ms", "5");
        expected.put("streamlab.sink.batch_size", "65536");
        expected.put("streamlab.sink.compression", "none");
        expected.put("streamlab.sink.idempotence", "true");
        expected.put("streamlab.sink.max_in_flight", "5");
        assertEquals(expected, SinkSettings.defaults().describe());
        assertEquals("(kafka default)", SinkSettings.describe(new Properties()).get("streamlab.sink.acks"));
    }

    @Test
    void parsesEveryOption() {
        SinkSettings s = parse("--sink-acks", "1", "--sink-linger-ms=0", "--sink-batch-size", "16384",
                "--sink-compression", "LZ4", "--sink-idempotence", "false", "--sink-max-in-flight", "10");
        assertEquals(Map.of("acks", "1", "linger.ms", "0", "batch.size", "16384", "compression.type", "lz4",
                "enable.idempotence", "false", "max.in.flight.requests.per.connection", "10"),
                Map.copyOf(s.toProperties()));
    }

    @Test
    void rejectsBadValues() {
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-acks", "2"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-linger-ms", "-1"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-linger-ms", "5ms"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-batch-size", "-5"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-compression", "brotli"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-idempotence", "yes"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-max-in-flight", "0"));
        // Kafka's own rules for an idempotent producer.
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-max-in-flight", "6"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-acks", "1"));
        assertThrows(IllegalArgumentException.class, () -> parse("--sink-timeout", "1"));
    }

    @Test
    void kafkaAcceptsTheDefaults() {
        Properties props = SinkSettings.defaults().toProperties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "k1:9092");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        ProducerConfig config = new ProducerConfig(props);
        assertEquals("-1", config.getString(ProducerConfig.ACKS_CONFIG));
        assertEquals(5L, config.getLong(ProducerConfig.LINGER_MS_CONFIG));
        assertEquals(65536, config.getInt(ProducerConfig.BATCH_SIZE_CONFIG));
        assertEquals(true, config.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
    }

    @Test
    void withOptionsAddsTheSinkOptions() {
        Set<String> all = SinkSettings.withOptions(Set.of("bootstrap"));
        assertEquals(7, all.size());
        new Args(new String[] {"--bootstrap", "x", "--sink-acks", "all"}, all);
    }
}
