CREATE TABLE "verification_devices" (
	"day" timestamp with time zone NOT NULL,
	"app" text NOT NULL,
	"mode" text NOT NULL,
	"service" text NOT NULL,
	"device" text NOT NULL,
	"reason" text NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	CONSTRAINT "verification_devices_pk" PRIMARY KEY("day","app","reason","mode","service","device")
);
--> statement-breakpoint
CREATE INDEX "verification_devices_last_at_idx" ON "verification_devices" USING btree ("last_at");