package streamlab;

import java.io.Serializable;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * A switch that makes a job lose data on purpose, for the one lab test that proves the kit's loss verdict can
 * fail: with {@code --test-drop-every N} (N &gt; 0) the job drops every input record whose {@code msg_id} is a
 * multiple of N after reading it, so its offsets are committed and the record never reaches the result topic.
 * Off (0) by default; a run that used it says so in its settings ({@link ReadBack#TEST_DROP_EVERY}).
 */
public final class DeliberateLoss implements Serializable {
    private static final long serialVersionUID = 1L;
    public static final String OPTION = "test-drop-every";

    private final long every;

    public DeliberateLoss(long every) {
        if (every < 0) {
            throw new IllegalArgumentException("--" + OPTION + " must be >= 0 (0: drop nothing), got: " + every);
        }
        this.every = every;
    }

    static DeliberateLoss from(Args args) {
        return new DeliberateLoss(args.getLong(OPTION, 0));
    }

    /** {@code known} plus this switch's option. */
    public static Set<String> withOption(Set<String> known) {
        Set<String> all = new LinkedHashSet<>(known);
        all.add(OPTION);
        return Set.copyOf(all);
    }

    public long every() {
        return every;
    }

    public boolean enabled() {
        return every > 0;
    }

    /** Whether the job drops this record: only an object whose integer msg_id is a multiple of N. */
    public boolean drops(String raw) {
        if (!enabled() || raw == null) {
            return false;
        }
        Long msgId = Enrich.msgId(raw);
        return msgId != null && msgId % every == 0;
    }
}
