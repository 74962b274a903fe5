CREATE TABLE "verification_stats_batches" (
	"id" text PRIMARY KEY NOT NULL,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "verification_stats_batches_applied_at_idx" ON "verification_stats_batches" USING btree ("applied_at");