package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KafkaConnectionTest {
    private static final Set<String> KNOWN = KafkaConnection.withOption(Set.of("bootstrap"));

    @Test
    void withoutTheOptionTheClientsConnectInPlaintext() {
        KafkaConnection plain = KafkaConnection.from(new Args(new String[] {"--bootstrap", "k:9092"}, KNOWN));
        assertTrue(plain.toProperties().isEmpty());
        assertEquals(Map.of("streamlab.kafka.security_protocol", "PLAINTEXT", "streamlab.kafka.sasl_mechanism", "(none)"),
                KafkaConnection.describe(plain.toProperties()));
    }

    @Test
    void theFileGivesTheConnectionSettingsAndTheReadBackNamesNoPassword(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, String.join("\n",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=SCRAM-SHA-512",
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                        + "username=\"streamlab\" password=\"secret-password\";",
                "ssl.truststore.type=PEM",
                "ssl.truststore.certificates=-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----",
                ""));
        KafkaConnection sasl = KafkaConnection.from(
                new Args(new String[] {"--kafka-config", file.toString()}, KNOWN));
        Properties props = sasl.toProperties();
        assertEquals("SASL_SSL", props.getProperty("security.protocol"));
        // Kafka types the trusted certificates as a password too: they stay in the file.
        assertEquals("${streamlabfile:" + file.toAbsolutePath() + ":ssl.truststore.certificates}",
                props.getProperty("ssl.truststore.certificates"));
        Map<String, String> described = KafkaConnection.describe(props);
        assertEquals("SASL_SSL", described.get("streamlab.kafka.security_protocol"));
        assertEquals("SCRAM-SHA-512", described.get("streamlab.kafka.sasl_mechanism"));
        assertFalse(described.toString().contains("secret-password"));
        assertFalse(sasl.toString().contains("secret-password"));
    }

    @Test
    void theSecretsStayInTheFileAndTheClientsReadThemFromItWhereTheyAreBuilt(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("client.properties");
        String jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required "
                + "username=\"streamlab\" password=\"secret-password\";";
        Files.writeString(file, String.join("\n",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=SCRAM-SHA-512",
                "sasl.jaas.config=" + jaas,
                "ssl.truststore.password=store-secret",
                ""));
        Properties props = KafkaConnection.load(file).toProperties();
        // What a topology or job graph would hold: references, no secret.
        assertFalse(props.toString().contains("secret"), props.toString());
        assertEquals("${streamlabfile:" + file.toAbsolutePath() + ":sasl.jaas.config}",
                props.getProperty("sasl.jaas.config"));
        assertEquals("SASL_SSL", props.getProperty("security.protocol"));
        // What a consumer and a producer built from them see.
        Map<String, Object> consumer = new HashMap<>();
        props.forEach((key, value) -> consumer.put((String) key, value));
        consumer.put("bootstrap.servers", "k:9092");
        Map<String, Object> producer = new HashMap<>(consumer);
        consumer.put("key.deserializer", StringDeserializer.class.getName());
        consumer.put("value.deserializer", StringDeserializer.class.getName());
        producer.put("key.serializer", StringSerializer.class.getName());
        producer.put("value.serializer", StringSerializer.class.getName());
        assertEquals(jaas, new ConsumerConfig(consumer).getPassword("sasl.jaas.config").value());
        assertEquals("store-secret", new ProducerConfig(producer).getPassword("ssl.truststore.password").value());
    }

    @Test
    void withoutSecretsNoProviderIsAdded(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SSL\n");
        assertEquals(Map.of("security.protocol", "SSL"), Map.copyOf(KafkaConnection.load(file).toProperties()));
    }

    @Test
    void anythingButConnectionSettingsIsRefused(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SASL_SSL\nacks=0\n");
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
                () -> KafkaConnection.load(file));
        assertTrue(error.getMessage().contains("sets acks"), error.getMessage());
    }

    @Test
    void aFileThatCannotBeReadIsNamed(@TempDir Path dir) {
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
                () -> KafkaConnection.load(dir.resolve("missing.properties")));
        assertTrue(error.getMessage().contains("missing.properties"), error.getMessage());
    }
}
