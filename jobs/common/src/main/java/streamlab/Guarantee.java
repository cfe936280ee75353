package streamlab;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The delivery guarantee a job runs under ({@code --guarantee}): what it promises about each input record's
 * results in the output topic. Each engine says which it offers and why it refuses the others.
 */
public enum Guarantee {
    /** No record is written twice; a failure may lose records. */
    AT_MOST_ONCE,
    /** No acknowledged record is lost; a failure may write some twice. */
    AT_LEAST_ONCE,
    /** Both: every record once in the committed output. */
    EXACTLY_ONCE;

    public static final String OPTION = "guarantee";

    /** The option's spelling: {@code at_least_once}. */
    public String option() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static Set<String> withOption(Set<String> known) {
        java.util.Set<String> all = new java.util.HashSet<>(known);
        all.add(OPTION);
        return Set.copyOf(all);
    }

    /**
     * {@code --guarantee} (default at_least_once) when {@code offered} holds it; otherwise an error naming what
     * the engine offers and, for a refused one, {@code refusal}.
     */
    static Guarantee from(Args args, Set<Guarantee> offered, String refusal) {
        String value = args.get(OPTION, AT_LEAST_ONCE.option()).trim().toLowerCase(Locale.ROOT);
        Guarantee chosen = Arrays.stream(values()).filter(g -> g.option().equals(value)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("--guarantee must be one of "
                        + options(EnumSet.allOf(Guarantee.class)) + ", got: " + value));
        if (!offered.contains(chosen)) {
            throw new IllegalArgumentException("--guarantee " + value + " is not offered: " + refusal
                    + "; offered: " + options(offered));
        }
        return chosen;
    }

    static String options(Set<Guarantee> guarantees) {
        return guarantees.stream().sorted().map(Guarantee::option).collect(Collectors.joining(", "));
    }
}
