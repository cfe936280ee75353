package streamlab;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Commits a finished micro-batch's end offsets to the job's consumer group. Spark keeps its offsets in its
 * checkpoint only; the kit's drain and lag samples read the group, as they do for the other engines. The
 * driver calls it with a batch's end offsets once the checkpoint logged that batch's commit (its output was
 * written), so the group never shows a record as consumed before its result is in the result topic.
 */
public final class SparkOffsetCommitter implements AutoCloseable {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private final KafkaConsumer<byte[], byte[]> consumer;

    public SparkOffsetCommitter(String bootstrap, String kafkaConfig, String groupId) {
        Properties props = kafkaConfig == null || kafkaConfig.isEmpty()
                ? new Properties() : KafkaConnection.load(java.nio.file.Path.of(kafkaConfig)).toProperties();
        props.setProperty(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.setProperty(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        props.setProperty(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // A commit that cannot reach the coordinator gives up soon: the driver tries again a second later.
        props.setProperty(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        props.setProperty(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.setProperty(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumer = new KafkaConsumer<>(props);
    }

    /** The offsets of Spark's Kafka source ({@code {"topic": {"0": 42}}}): each partition's next offset. */
    static Map<TopicPartition, OffsetAndMetadata> parse(String endOffsetJson) throws java.io.IOException {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        JsonNode root = MAPPER.readTree(endOffsetJson);
        for (Iterator<Map.Entry<String, JsonNode>> topics = root.fields(); topics.hasNext(); ) {
            Map.Entry<String, JsonNode> topic = topics.next();
            for (Iterator<Map.Entry<String, JsonNode>> parts = topic.getValue().fields(); parts.hasNext(); ) {
                Map.Entry<String, JsonNode> part = parts.next();
                long offset = part.getValue().asLong(-1);
                if (offset >= 0) {
                    offsets.put(new TopicPartition(topic.getKey(), Integer.parseInt(part.getKey())),
                            new OffsetAndMetadata(offset));
                }
            }
        }
        return offsets;
    }

    /** Commits and returns how many partitions it committed. */
    public int commit(String endOffsetJson) throws java.io.IOException {
        Map<TopicPartition, OffsetAndMetadata> offsets = parse(endOffsetJson);
        if (!offsets.isEmpty()) {
            consumer.commitSync(offsets);
        }
        return offsets.size();
    }

    @Override
    public void close() {
        consumer.close();
    }
}
