package streamlab;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;

/**
 * Starts every split at KafkaPartitionSplit's LATEST_OFFSET marker, which the reader resolves when it is given
 * the split. Without checkpoints a failed reader's splits come back as they were first assigned, so a marker
 * (unlike OffsetsInitializer.latest()'s offsets, resolved once at the job's start) makes a restart skip to the
 * newest record instead of replaying the run from its start.
 */
final class NewestOnEveryStart implements OffsetsInitializer {
    private static final long serialVersionUID = 1L;

    @Override
    public Map<TopicPartition, Long> getPartitionOffsets(Collection<TopicPartition> partitions,
                                                        PartitionOffsetsRetriever retriever) {
        Map<TopicPartition, Long> out = new HashMap<>();
        partitions.forEach(p -> out.put(p, KafkaPartitionSplit.LATEST_OFFSET));
        return out;
    }

    @Override
    public OffsetResetStrategy getAutoOffsetResetStrategy() {
        return OffsetResetStrategy.LATEST;
    }
}
